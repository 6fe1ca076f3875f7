#include "conveyor/runtime/pipeline_rank.h"

namespace conveyor {

PipelineRank::PipelineRank(const Program& program, int rank, Transport* transport,
                           const MakeStageModule& make_module,
                           at::TensorOptions activation_options)
    : program_(program), rank_(rank) {
  const Layout& layout = program_.layout;
  CONVEYOR_CHECK(rank >= 0 && rank < layout.num_ranks())
      << "rank " << rank << " is outside the program's " << layout.num_ranks() << " ranks";
  std::map<int, Stage*> raw;
  for (int s : layout.stages_of(rank)) {
    stages_[s] = std::make_unique<Stage>(s, layout.is_first_stage(s), layout.is_last_stage(s),
                                         make_module(s));
    raw[s] = stages_[s].get();
  }
  executor_ = std::make_unique<Executor>(program_, rank, transport, std::move(raw),
                                         activation_options);
}

double PipelineRank::Step(const std::vector<MicroBatch>& microbatches) {
  return executor_->RunStep(microbatches);
}

NamedTensors PipelineRank::NamedParameters() const {
  NamedTensors all;
  for (const auto& [index, stage] : stages_) {
    for (auto& named : stage->module().NamedParameters()) all.push_back(std::move(named));
  }
  return all;
}

}  // namespace conveyor
