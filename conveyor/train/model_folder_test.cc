// Training from a Hugging Face model folder (--model DIR): the folder's weights are the
// initial ones, on any mesh.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "conveyor/common/remove_tree.h"
#include "conveyor/nn/hf_checkpoint_testing.h"
#include "conveyor/train/builtin_tasks.h"
#include "conveyor/train/train_testing.h"

namespace conveyor {
namespace {

class ModelFolderTest : public ::testing::Test {
 protected:
  void SetUp() override { at::set_num_threads(1); }
};

// A Llama started from a Hugging Face folder (--model DIR) starts from its weights: the
// folder of the weights the seed draws trains exactly as from scratch, on a mesh from a sharded
// bf16 folder as one process from the same folder; another folder's weights give other losses.
TEST_F(ModelFolderTest, LlamaStartsFromAHuggingFaceFolder) {
  TrainConfig c = TinyLlama();
  c.pp = 2;
  c.schedule = "1f1b";
  const std::vector<double> scratch = TrainOnThreads(c);
  const LlamaConfig llama = LlamaConfigOf(c);
  const std::string dir =
      ::testing::TempDir() + "conveyor_trainer_hf_" + std::to_string(::getpid());
  auto folder = [&](const std::map<std::string, at::Tensor>& weights, at::ScalarType dtype,
                    bool shards) {
    RemoveTree(dir);
    std::filesystem::create_directories(dir);
    WriteHfLlamaFolder(dir, llama, weights, dtype, shards);
    TrainConfig from = c;
    SetModel(from, dir, "--model");
    ApplyModelFolder(from);
    return from;
  };
  ExpectSameLosses(scratch, TrainOnThreads(folder(LlamaWeights(llama, c.seed), at::kFloat, false)),
                   "from the folder", 0);
  std::map<std::string, at::Tensor> larger = LlamaWeights(llama, c.seed + 1);
  for (auto& [name, w] : larger) w = w * 3;  // logits far from uniform: another first loss
  TrainConfig bf16 = folder(larger, at::kBFloat16, true);
  const std::vector<double> other = TrainOnThreads(bf16);
  EXPECT_GT(std::abs(other[0] - scratch[0]), 0.1) << "the folder's weights were not loaded";
  bf16.tp = 2;
  bf16.dp = 2;
  bf16.schedule = "zb-h1";
  ExpectSameLosses(other, TrainOnThreads(bf16), "dp 2 x tp 2 x pp 2 from a sharded bf16 folder");
  RemoveTree(dir);
}

}  // namespace
}  // namespace conveyor
