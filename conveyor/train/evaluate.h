// Held-out evaluation of a model: a task's evaluation batches run through a forward-only
// pipeline over the model's stages.
#ifndef CONVEYOR_TRAIN_EVALUATE_H_
#define CONVEYOR_TRAIN_EVALUATE_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "conveyor/train/forward_pipeline.h"
#include "conveyor/train/train_task.h"

namespace conveyor {

struct EvalMetrics {
  int64_t step = 0;      // the training step when evaluated (as the caller says)
  double loss = 0;       // mean over the evaluation batches
  double accuracy = -1;  // over every evaluation sample; -1 when the task has none
  int64_t batches = 0;   // evaluated; 0 when there is no held-out data (loss 0 then)
};

// Runs every evaluation batch of `task` (each split into min(microbatches x dp, samples)
// micro-batches) through `forward`, the batches shared across the data-parallel
// replicas (replica d runs batches d, d + dp, ...; every rank of a replica runs them; under
// expert parallelism, whose forwards exchange tokens between replicas, every replica runs a
// forward each round, the last round's short ones an uncounted repeat), their
// losses and counts then summed over the world: the metrics are those of one replica
// evaluating them all (to rounding). UserError when a schedule with two pipeline directions
// meets a batch of one sample. Returns the same metrics on every rank. Collective over the
// model's world. `step` is reported as the metrics' step.
EvalMetrics Evaluate(ForwardPipeline& forward, const TrainTask& task, int64_t step);

// The mean next-token cross-entropy over the windows of a token stream (NextTokenWindows,
// data/token_windows.h): the summed loss of every counted target over their count, each
// window's loss taken whole (never a mean of means), and its exponential.
struct TokenEvalMetrics {
  int64_t tokens = 0;  // targets predicted: N - 1 for a stream of N tokens
  double loss = 0;
  double perplexity = 0;
};

// Runs `windows` (batches whose targets -1 are not counted) through `forward`, shared across
// the data-parallel replicas as Evaluate shares them; the same metrics on every rank.
// `progress`, when set, is called after each batch this rank ran with (batches up to and
// including it, all batches). Collective over the model's world. UserError when no target is
// counted.
TokenEvalMetrics EvaluateTokens(ForwardPipeline& forward, const std::vector<Batch>& windows,
                                const std::function<void(int64_t, int64_t)>& progress = {});

}  // namespace conveyor

#endif  // CONVEYOR_TRAIN_EVALUATE_H_
