// conveyor's Llama on a mesh against an independent plain-PyTorch implementation
// (testdata/reference/llama.py): the exact evaluation loss of the same Hugging Face folder
// over the same windows, at pp 1, 2 and 4, tp 2 and dp 2 x tp 2 x pp 2.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "conveyor/data/token_windows.h"
#include "conveyor/nn/hf_checkpoint_testing.h"
#include "conveyor/train/builtin_tasks.h"
#include "conveyor/train/evaluate.h"
#include "conveyor/train/train_testing.h"

namespace conveyor {
namespace {

TEST(LlamaReferenceTest, EvalLossOnEveryMeshIsTheReferences) {
  if (!PythonHasTorch()) GTEST_SKIP() << "/usr/bin/python3 cannot import torch (python3-torch)";
  at::set_num_threads(1);
  TrainConfig c = TinyLlama();
  c.layers = 6;  // 8 layers: enough for 4 stages
  const LlamaConfig llama = LlamaConfigOf(c);
  const std::string dir =
      ::testing::TempDir() + "conveyor_llama_reference_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::map<std::string, at::Tensor> weights = LlamaWeights(llama, 3);
  for (auto& [name, w] : weights) w = w * 4;  // logits far from uniform
  WriteHfLlamaFolder(dir, llama, weights, at::kFloat, /*shards=*/true);
  SetModel(c, dir, "--model");
  ApplyModelFolder(c);

  // The reference: its logits of every window, the loss of their counted targets.
  const at::Tensor stream = at::randint(0, 256, {150}, at::kLong);
  const std::vector<Batch> windows = NextTokenWindows(stream, c.seq_len, 4);
  std::vector<at::Tensor> inputs, targets;
  for (const Batch& b : windows) inputs.push_back(b.inputs), targets.push_back(b.targets);
  const at::Tensor logits = ReferenceLlamaLogits(dir, at::cat(inputs));
  ASSERT_TRUE(logits.defined());
  const double want = at::cross_entropy_loss(logits.reshape({-1, logits.size(-1)}),
                                             at::cat(targets).reshape({-1}), {},
                                             at::Reduction::Mean, -1)
                          .item<double>();

  struct Mesh {
    int dp, tp, pp;
    const char* schedule;
  };
  for (const Mesh& m : {Mesh{1, 1, 1, "gpipe"}, Mesh{1, 1, 2, "1f1b"}, Mesh{1, 1, 4, "1f1b"},
                        Mesh{1, 2, 1, "gpipe"}, Mesh{2, 2, 2, "zb-h1"}}) {
    TrainConfig mesh = c;
    mesh.dp = m.dp;
    mesh.tp = m.tp;
    mesh.pp = m.pp;
    mesh.schedule = m.schedule;
    mesh.microbatches = 2;
    TrainOnThreads(
        mesh,
        [&](Trainer& t, Transport&) {
          ForwardPipeline forward(t.model());
          const TokenEvalMetrics got = EvaluateTokens(forward, windows);
          EXPECT_EQ(got.tokens, 149);
          EXPECT_NEAR(got.loss, want, 1e-5 * want)
              << "dp " << m.dp << " x tp " << m.tp << " x pp " << m.pp;
        },
        -1);
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace conveyor
