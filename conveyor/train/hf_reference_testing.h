// Test support: conveyor's evaluation of a Hugging Face model folder, on one rank and on
// meshes of every kind, for tests that compare it with another implementation's (a
// plain-PyTorch reference's, transformers' own).
#ifndef CONVEYOR_TRAIN_HF_REFERENCE_TESTING_H_
#define CONVEYOR_TRAIN_HF_REFERENCE_TESTING_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "conveyor/module/microbatch.h"
#include "conveyor/train/train_config.h"

namespace conveyor {

// One mesh a folder is evaluated on.
struct EvalMesh {
  int dp, tp, pp;
  const char* schedule;
  int ep = 1;
};

// dp 1 x tp 1 x pp 1, 2 and 4, tp 2, dp 2 x tp 2 x pp 2; a model with experts (c.model.experts
// > 0) also with them spread over data-parallel ranks (dp 2 x pp 2, ep 2) and over data- and
// tensor-parallel ones (dp 2 x tp 2, ep 4).
std::vector<EvalMesh> EvalMeshes(const TrainConfig& c);

// Evaluates `windows` (EvaluateTokens) with the model of `c` (SetModel and ApplyModelFolder
// done; 2 micro-batches) on every mesh of EvalMeshes, expecting on every rank `tokens` targets
// counted and a loss within `relative` of `want`.
void ExpectEvalLossOnEveryMesh(const TrainConfig& c, const std::vector<Batch>& windows,
                               int64_t tokens, double want, double relative = 1e-5);

// The loss of `windows` (EvaluateTokens) with the model of `c` on one rank.
double EvalLossOnOneRank(const TrainConfig& c, const std::vector<Batch>& windows);

// The logits conveyor computes for `ids` (n, T) int64 with the model of `c` on one rank, as
// one micro-batch: (n, T, V) fp32.
at::Tensor LogitsOnOneRank(const TrainConfig& c, const at::Tensor& ids);

// Windows of rows of `ids` (n, T + 1): batches of `rows` rows each, inputs the first T tokens
// of a row, targets the last T (every one counted).
std::vector<Batch> RowWindows(const at::Tensor& ids, int64_t rows);

}  // namespace conveyor

#endif  // CONVEYOR_TRAIN_HF_REFERENCE_TESTING_H_
