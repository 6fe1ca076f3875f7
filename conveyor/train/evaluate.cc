#include "conveyor/train/evaluate.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <vector>

#include "conveyor/common/error.h"
#include "conveyor/train/world_collectives.h"

namespace conveyor {

EvalMetrics Evaluate(ForwardPipeline& forward, const TrainTask& task, int64_t step) {
  const PipelineModel& model = forward.model();
  EvalMetrics m;
  m.step = step;
  double loss = 0, correct = 0, counted = 0;
  const std::vector<Batch> batches = task.EvalBatches();
  m.batches = static_cast<int64_t>(batches.size());
  if (batches.empty()) return m;  // alike on every rank
  const Mesh& mesh = model.mesh();
  const MeshCoords& coords = model.coords();
  for (size_t i = 0; i < batches.size(); ++i) {
    const Batch& batch = batches[i];
    counted += static_cast<double>(batch.inputs.size(0));
    const int mbs = std::min<int>(model.config().microbatches, batch.inputs.size(0));
    CONVEYOR_CHECK(model.program().layout.directions() == 1 || mbs >= 2)
        << "evaluation batches need at least 2 samples for two pipeline directions";
    // Each replica evaluates its share of the batches; all of its ranks run them (TP layers
    // are collective).
    if (static_cast<int>(i % mesh.dp()) != coords.dp) continue;
    const std::vector<MicroBatch> split = SplitBatch(ToDevice(batch, model.device()), mbs);
    const Executor::Inference result = forward.Run(split);
    loss += result.loss;
    if (task.has_accuracy()) {
      for (const auto& [index, logits] : result.outputs) {
        correct += task.CountCorrect(logits, split[index]);
      }
    }
  }
  // The last stages of every pipeline hold its batches' losses; the TP ranks of a pipeline
  // hold the same ones, so TP rank 0's count.
  const double share = coords.tp == 0 ? 1 : 0;
  const at::Tensor sums = SumOverRanks(
      model.world(), at::tensor(std::vector<double>{share * loss, share * correct}, at::kDouble));
  m.loss = sums[0].item<double>() / static_cast<double>(batches.size());
  if (task.has_accuracy()) m.accuracy = sums[1].item<double>() / counted;
  return m;
}

}  // namespace conveyor
