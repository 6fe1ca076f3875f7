#include "conveyor/train/evaluate.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "conveyor/common/error.h"
#include "conveyor/train/world_collectives.h"

namespace conveyor {

namespace {

// Runs `batches` through `forward`, batch i on replica i % dp (every rank of a replica runs
// it: TP layers are collective), each split into min(microbatches x dp, samples)
// micro-batches (training's size: a replica runs a whole batch, not its share of one; under
// expert parallelism the fewest samples of the batches the replicas run at once) of
// `loss_denominator` (0: the batch's own count of targets); calls `visit` with each result
// this rank computed and its micro-batches, and returns the sum of the world's losses (TP
// rank 0's count: a pipeline's TP ranks hold the same ones) with that of `extra`.
std::vector<double> RunOnReplicas(
    ForwardPipeline& forward, const std::vector<Batch>& batches, double loss_denominator,
    const std::function<double(const Executor::Inference&, const std::vector<MicroBatch>&)>& extra,
    const std::function<void(int64_t, int64_t)>& progress = {}) {
  const PipelineModel& model = forward.model();
  const Mesh& mesh = model.mesh();
  const MeshCoords& coords = model.coords();
  const int dp = mesh.dp();
  const int64_t most = int64_t{model.config().microbatches} * dp;
  for (const Batch& batch : batches) {
    CONVEYOR_CHECK(model.program().layout.directions() == 1 ||
                   std::min(most, batch.inputs.size(0)) >= 2)
        << "evaluation batches need at least 2 samples for two pipeline directions";
  }
  // Under expert parallelism the replicas exchange tokens inside every forward, so they run
  // in lockstep: a batch each round, split into the round's one micro-batch count (its
  // smallest batch's), a replica without a batch of its own running the round's first again,
  // uncounted.
  const bool lockstep = model.ep_group() != nullptr;
  double loss = 0, more = 0;
  for (size_t first = 0; first < batches.size(); first += dp) {
    const size_t i = first + coords.dp;
    const bool mine = i < batches.size();
    if (!mine && !lockstep) continue;
    const Batch& batch = batches[mine ? i : first];
    int64_t samples = batch.inputs.size(0);
    for (size_t j = first; lockstep && j < std::min(first + dp, batches.size()); ++j) {
      samples = std::min(samples, batches[j].inputs.size(0));
    }
    const int mbs = static_cast<int>(std::min(most, samples));
    const std::vector<MicroBatch> split =
        SplitBatch(ToDevice(batch, model.device()), mbs, loss_denominator);
    // The logits only where `extra` reads them: a micro-batch's at a time otherwise.
    const Executor::Inference result = forward.Run(split, /*keep_outputs=*/extra != nullptr);
    if (!mine) continue;
    loss += result.loss;
    if (extra) more += extra(result, split);
    if (progress) progress(static_cast<int64_t>(i) + 1, static_cast<int64_t>(batches.size()));
  }
  const double share = coords.tp == 0 ? 1 : 0;
  const at::Tensor sums = SumOverRanks(
      model.world(), at::tensor(std::vector<double>{share * loss, share * more}, at::kDouble));
  return {sums[0].item<double>(), sums[1].item<double>()};
}

}  // namespace

EvalMetrics Evaluate(ForwardPipeline& forward, const TrainTask& task, int64_t step) {
  EvalMetrics m;
  m.step = step;
  const std::vector<Batch> batches = task.EvalBatches();
  m.batches = static_cast<int64_t>(batches.size());
  if (batches.empty()) return m;  // alike on every rank
  double counted = 0;
  for (const Batch& batch : batches) counted += static_cast<double>(batch.inputs.size(0));
  std::function<double(const Executor::Inference&, const std::vector<MicroBatch>&)> correct;
  if (task.has_accuracy()) {
    correct = [&](const Executor::Inference& result, const std::vector<MicroBatch>& split) {
      double n = 0;
      for (const auto& [index, logits] : result.outputs) {
        n += task.CountCorrect(logits, split[index]);
      }
      return n;
    };
  }
  const std::vector<double> sums = RunOnReplicas(forward, batches, 0, correct);
  m.loss = sums[0] / static_cast<double>(batches.size());
  if (task.has_accuracy()) m.accuracy = sums[1] / counted;
  return m;
}

TokenEvalMetrics EvaluateTokens(ForwardPipeline& forward, const std::vector<Batch>& windows,
                                const std::function<void(int64_t, int64_t)>& progress) {
  TokenEvalMetrics m;
  for (const Batch& batch : windows) m.tokens += static_cast<int64_t>(CountTargets(batch.targets));
  CONVEYOR_CHECK(m.tokens > 0) << "no token to predict";
  m.loss = RunOnReplicas(forward, windows, 1, nullptr, progress)[0] / static_cast<double>(m.tokens);
  m.perplexity = std::exp(m.loss);
  return m;
}

}  // namespace conveyor
