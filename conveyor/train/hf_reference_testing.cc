#include "conveyor/train/hf_reference_testing.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "conveyor/train/evaluate.h"
#include "conveyor/train/forward_pipeline.h"
#include "conveyor/train/train_testing.h"

namespace conveyor {

std::vector<EvalMesh> EvalMeshes(const TrainConfig& c) {
  std::vector<EvalMesh> meshes = {EvalMesh{1, 1, 1, "gpipe"}, EvalMesh{1, 1, 2, "1f1b"},
                                  EvalMesh{1, 1, 4, "1f1b"}, EvalMesh{1, 2, 1, "gpipe"},
                                  EvalMesh{2, 2, 2, "zb-h1"}};
  if (c.model.experts > 0) {  // the experts spread over data- and tensor-parallel ranks
    meshes.push_back(EvalMesh{2, 1, 2, "1f1b", 2});
    meshes.push_back(EvalMesh{2, 2, 1, "gpipe", 4});
  }
  return meshes;
}

void ExpectEvalLossOnEveryMesh(const TrainConfig& c, const std::vector<Batch>& windows,
                               int64_t tokens, double want, double relative) {
  for (const EvalMesh& m : EvalMeshes(c)) {
    TrainConfig mesh = c;
    mesh.dp = m.dp;
    mesh.tp = m.tp;
    mesh.pp = m.pp;
    mesh.ep = m.ep;
    mesh.schedule = m.schedule;
    mesh.microbatches = 2;
    TrainOnThreads(
        mesh,
        [&](Trainer& t, Transport&) {
          ForwardPipeline forward(t.model());
          const TokenEvalMetrics got = EvaluateTokens(forward, windows);
          EXPECT_EQ(got.tokens, tokens);
          EXPECT_NEAR(got.loss, want, relative * want)
              << "dp " << m.dp << " x tp " << m.tp << " x pp " << m.pp << ", ep " << m.ep;
        },
        -1);
  }
}

namespace {

// `c` on one rank, without training.
TrainConfig OneRank(const TrainConfig& c) {
  TrainConfig one = c;
  one.dp = one.tp = one.pp = one.ep = 1;
  one.schedule = "gpipe";
  return one;
}

}  // namespace

double EvalLossOnOneRank(const TrainConfig& c, const std::vector<Batch>& windows) {
  double loss = 0;
  TrainOnThreads(
      OneRank(c),
      [&](Trainer& t, Transport&) {
        ForwardPipeline forward(t.model());
        loss = EvaluateTokens(forward, windows).loss;
      },
      -1);
  return loss;
}

at::Tensor LogitsOnOneRank(const TrainConfig& c, const at::Tensor& ids) {
  at::Tensor logits;
  TrainOnThreads(
      OneRank(c),
      [&](Trainer& t, Transport&) {
        ForwardPipeline forward(t.model());
        Batch batch{ids, at::roll(ids, -1, 1), {}};
        const Executor::Inference result = forward.Run(SplitBatch(batch, 1));
        logits = result.outputs.at(0).to(at::kCPU, at::kFloat);
      },
      -1);
  return logits;
}

std::vector<Batch> RowWindows(const at::Tensor& ids, int64_t rows) {
  const int64_t length = ids.size(1) - 1;
  std::vector<Batch> windows;
  for (int64_t first = 0; first < ids.size(0); first += rows) {
    const at::Tensor part = ids.slice(0, first, first + rows);
    windows.push_back(Batch{
        part.slice(1, 0, length).contiguous(), part.slice(1, 1, length + 1).contiguous(), {}});
  }
  return windows;
}

}  // namespace conveyor
