// Training from a Hugging Face model folder (--model DIR): the folder's weights are the
// initial ones, on any mesh.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "conveyor/common/error.h"
#include "conveyor/common/remove_tree.h"
#include "conveyor/formats/hf_checkpoint_testing.h"
#include "conveyor/nn/hf_config.h"
#include "conveyor/train/gpt_architecture.h"
#include "conveyor/train/llama_architecture.h"
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
  const LlamaConfig llama = LlamaConfigOf(c.model);
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

// A size in config.json out of its setting's range is named by the file and its key there,
// not by a flag the user never gave.
TEST_F(ModelFolderTest, ASizeOutOfRangeNamesTheFileAndItsKey) {
  const std::string dir =
      ::testing::TempDir() + "conveyor_folder_sizes_" + std::to_string(::getpid());
  RemoveTree(dir);
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/config.json";
  auto refused = [&](const std::string& json, const std::string& message) {
    std::ofstream(path) << json;
    TrainConfig c = TinyLlama();
    try {
      SetModel(c, dir, "--model");
      ApplyModelFolder(c);
      ADD_FAILURE() << "accepted; expected: " << message;
    } catch (const UserError& e) {
      EXPECT_EQ(std::string(e.what()), path + ": " + message);
    }
  };
  LlamaConfig llama = LlamaConfigOf(TinyLlama().model);
  llama.hidden = 1 << 17;
  refused(HfLlamaConfigJson(llama, "float32"), "hidden_size must be within [1, 65536], got 131072");
  llama = LlamaConfigOf(TinyLlama().model);
  llama.layers = 5000;
  refused(HfLlamaConfigJson(llama, "float32"),
          "num_hidden_layers must be within [1, 4096], got 5000");
  GptConfig gpt = GptConfigOf(TinyGpt().model);
  gpt.layers = 5000;
  refused(HfGpt2ConfigJson(gpt, "float32"), "n_layer must be within [1, 4096], got 5000");
  RemoveTree(dir);
}

}  // namespace
}  // namespace conveyor
