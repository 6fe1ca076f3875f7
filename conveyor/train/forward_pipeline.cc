#include "conveyor/train/forward_pipeline.h"

#include <ATen/ATen.h>

#include "conveyor/schedule/builders/forward_only.h"
#include "conveyor/schedule/lower.h"

namespace conveyor {
namespace {

// `layout`'s placement of stages on ranks, for `microbatches` micro-batches.
Layout SameLayoutWith(const Layout& layout, int microbatches) {
  switch (layout.placement()) {
    case Placement::kLoop:
      return Layout::Loop(layout.num_ranks(), layout.chunks_per_rank(), microbatches);
    case Placement::kV:
      return Layout::V(layout.num_ranks(), microbatches);
    case Placement::kDual:
      return Layout::Dual(layout.num_ranks(), microbatches);
    case Placement::kCustom:
      break;
  }
  return Layout::Custom(layout.num_ranks(), layout.stage_to_rank(), microbatches,
                        layout.directions());
}

}  // namespace

ForwardPipeline::ForwardPipeline(PipelineModel& model) : model_(model) {}

Executor::Inference ForwardPipeline::Run(const std::vector<MicroBatch>& mbs, bool keep_outputs) {
  const int m = static_cast<int>(mbs.size());
  auto it = built_.find(m);
  if (it == built_.end()) {
    it = built_.try_emplace(m, Lower(BuildForwardOnly(SameLayoutWith(model_.program().layout, m))))
             .first;
    std::map<int, Stage*> stages;
    for (const auto& [index, stage] : model_.pipeline().stages()) stages[index] = stage.get();
    it->second.executor = std::make_unique<Executor>(
        it->second.program, model_.pipeline_rank(), model_.pipeline_group(), stages,
        at::TensorOptions().dtype(model_.message_dtype()).device(model_.device()));
  }
  return it->second.executor->RunInference(mbs, keep_outputs);
}

void ConfigureForwardOnly(TrainConfig& config) {
  config.metrics.clear();
  config.trace.clear();
  config.tensorboard.clear();
  config.checkpoint_dir.clear();
  if (config.partition == PartitionBy::kProfile) config.partition = PartitionBy::kParams;
}

}  // namespace conveyor
