// One rank's `conveyor eval`: a language model alone (no optimizer or measurement) on a
// forward-only pipeline, with a checkpoint's weights or a Hugging Face folder's, over every
// token of a data set or a text (EvaluateTokens, evaluate.h).
#ifndef CONVEYOR_TRAIN_EVALUATION_RUN_H_
#define CONVEYOR_TRAIN_EVALUATION_RUN_H_

#include <cstdint>
#include <functional>
#include <string>

#include "conveyor/comm/rank_context.h"
#include "conveyor/train/evaluate.h"
#include "conveyor/train/train_config.h"

namespace conveyor {

struct EvaluationRun {
  TokenEvalMetrics metrics;
  // What was read: the data set's Describe, or "corpus SOURCE: N documents" for a text.
  std::string source;
  bool loss_mask = false;  // whether only the targets a loss mask marks were counted
};

// Called after each batch this rank ran: batches done (up to and including it), all
// batches, and seconds since the first began.
using EvaluationProgress = std::function<void(int64_t done, int64_t total, double seconds)>;

// Reads config.data whole (a tokenized data set or token file, IsTokenSource; else a text,
// as bytes) into windows of config.model.seq_len tokens, config.batch_size a batch
// (NextTokenWindows; a data set's targets by its loss mask when it has one, OpenLossMask; the
// documents kept apart with config.document_mask), builds the model of `config` as `rank`, loads `checkpoint`'s weights
// (when not empty) and evaluates every window. Collective over the world; the same metrics
// on every rank. UserError as EvaluateTokens, or for data that cannot be read.
EvaluationRun RunEvaluation(const TrainConfig& config, const std::string& checkpoint,
                            const RankContext& rank, const EvaluationProgress& progress = {});

}  // namespace conveyor

#endif  // CONVEYOR_TRAIN_EVALUATION_RUN_H_
