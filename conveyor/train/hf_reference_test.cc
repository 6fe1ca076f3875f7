// conveyor's Llama and GPT-2 on a mesh against independent plain-PyTorch implementations
// (testdata/reference/llama.py, gpt2.py): the exact evaluation loss of the same Hugging Face
// folder over the same windows, at pp 1, 2 and 4, tp 2 and dp 2 x tp 2 x pp 2.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "conveyor/common/remove_tree.h"
#include "conveyor/data/token_windows.h"
#include "conveyor/formats/hf_checkpoint.h"
#include "conveyor/formats/hf_checkpoint_testing.h"
#include "conveyor/nn/gpt.h"
#include "conveyor/train/builtin_tasks.h"
#include "conveyor/train/evaluate.h"
#include "conveyor/train/gpt_architecture.h"
#include "conveyor/train/hf_reference_testing.h"
#include "conveyor/train/llama_architecture.h"
#include "conveyor/train/train_testing.h"

namespace conveyor {
namespace {

// The folder `dir` (config.json and weights) evaluated by conveyor on every mesh, `c` its
// run configuration (SetModel, ApplyModelFolder done), against the reference's loss.
void ExpectEvalLossOnEveryMeshIsTheReferences(const TrainConfig& c, const std::string& dir) {
  // The reference: its logits of every window, the loss of their counted targets.
  const at::Tensor stream = at::randint(0, 256, {150}, at::kLong);
  const std::vector<Batch> windows = NextTokenWindows(stream, c.model.seq_len, 4);
  std::vector<at::Tensor> inputs, targets;
  for (const Batch& b : windows) inputs.push_back(b.inputs), targets.push_back(b.targets);
  const at::Tensor logits = ReferenceLogits(dir, at::cat(inputs));
  ASSERT_TRUE(logits.defined());
  const double want =
      at::cross_entropy_loss(logits.reshape({-1, logits.size(-1)}), at::cat(targets).reshape({-1}),
                             {}, at::Reduction::Mean, -1)
          .item<double>();
  ExpectEvalLossOnEveryMesh(c, windows, 149, want);
}

// A fresh folder for one test.
std::string ScratchDir(const std::string& name) {
  const std::string dir =
      ::testing::TempDir() + "conveyor_" + name + "_" + std::to_string(::getpid());
  RemoveTree(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

TEST(HfReferenceTest, ALlamasEvalLossOnEveryMeshIsTheReferences) {
  if (!PythonHasTorch()) GTEST_SKIP() << "/usr/bin/python3 cannot import torch (python3-torch)";
  at::set_num_threads(1);
  TrainConfig c = TinyLlama();
  c.model.layers = 6;  // 8 layers: enough for 4 stages
  const LlamaConfig llama = LlamaConfigOf(c.model);
  const std::string dir = ScratchDir("llama_reference");
  std::map<std::string, at::Tensor> weights = LlamaWeights(llama, 3);
  for (auto& [name, w] : weights) w = w * 4;  // logits far from uniform
  WriteHfLlamaFolder(dir, llama, weights, at::kFloat, /*shards=*/true);
  SetModel(c, dir, "--model");
  ApplyModelFolder(c);
  ExpectEvalLossOnEveryMeshIsTheReferences(c, dir);
  RemoveTree(dir);
}

// A Mixtral (every layer sparse, 4 experts, top 2, gates renormalised) and a Qwen3-MoE
// (per-head query and key norms, gates not renormalised, every other layer dense) written
// by conveyor's writer and read by the reference: their eval loss on every mesh, the experts
// spread over data- and tensor-parallel ranks too.
TEST(HfReferenceTest, MoeFoldersEvalLossOnEveryMeshIsTheReferences) {
  if (!PythonHasTorch()) GTEST_SKIP() << "/usr/bin/python3 cannot import torch (python3-torch)";
  at::set_num_threads(1);
  for (const bool mixtral : {true, false}) {
    TrainConfig c = TinyLlama();
    c.model.layers = 6;
    c.model.experts = 4;
    c.model.top_k = 2;
    c.model.moe_mixtral_names = mixtral;
    if (!mixtral) {
      c.model.qk_norm = "head";
      c.model.router_plain_gates = true;
      c.model.moe_sparse_step = 2;
      c.model.expert_units = 24;
    }
    const LlamaConfig llama = LlamaConfigOf(c.model);
    const std::string dir = ScratchDir(mixtral ? "mixtral_reference" : "qwen3_moe_reference");
    std::map<std::string, at::Tensor> weights = LlamaWeights(llama, 3);
    for (auto& [name, w] : weights) w = w * 4;  // logits far from uniform, the routers' too
    WriteHfLlamaFolder(dir, llama, weights, at::kFloat, /*shards=*/true);
    SetModel(c, dir, "--model");
    ApplyModelFolder(c);
    ASSERT_EQ(c.model.experts, 4);
    ExpectEvalLossOnEveryMeshIsTheReferences(c, dir);
    RemoveTree(dir);
  }
}

// A GPT-2 (Conv1D weights, GELU's tanh form, tied head, more positions than the sequence, a
// vocabulary of its own) written by conveyor's writer and read by the reference's own code.
TEST(HfReferenceTest, AGpt2sEvalLossOnEveryMeshIsTheReferences) {
  if (!PythonHasTorch()) GTEST_SKIP() << "/usr/bin/python3 cannot import torch (python3-torch)";
  at::set_num_threads(1);
  TrainConfig c = TinyGpt();
  c.model.layers = 6;
  c.model.vocab = 301;  // odd: padded to 151 rows a rank at tp 2
  c.model.positions = 40;
  c.model.gelu_tanh = true;
  c.model.tie_embeddings = true;
  HfModelConfig folder;
  folder.type = "gpt2";
  folder.gpt = GptConfigOf(c.model);
  std::map<std::string, at::Tensor> weights;
  for (const auto& layer : BuildGpt(folder.gpt, 3)) {
    for (const auto& [name, p] : layer->NamedParameters()) weights[name] = p.detach() * 4;
  }
  const std::string dir = ScratchDir("gpt2_reference");
  std::filesystem::remove(dir);
  HfWriteOptions options;
  options.shard_bytes = 100000;  // several files
  WriteHfCheckpoint(dir, folder, options,
                    [&](const std::string& name) { return weights.at(name); });
  TrainConfig from = TinyGpt();
  SetModel(from, dir, "--model");
  ApplyModelFolder(from);
  EXPECT_EQ(from.model.kind, ModelKind::kGpt);
  EXPECT_TRUE(from.model.gelu_tanh);
  EXPECT_EQ(from.model.positions, 40);
  ExpectEvalLossOnEveryMeshIsTheReferences(from, dir);
  RemoveTree(dir);
}

}  // namespace
}  // namespace conveyor
