// Mixture-of-Experts Llamas (Mixtral, Qwen2-MoE, Qwen3-MoE, OLMoE) and Qwen2 read from
// Hugging Face folders written here against independent plain-PyTorch implementations of
// Hugging Face's models (testdata/reference/mixtral.py, qwen2_moe.py, qwen3_moe.py,
// olmoe.py, qwen2.py).
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <map>
#include <string>

#include "conveyor/common/error.h"
#include "conveyor/common/remove_tree.h"
#include "conveyor/formats/hf_checkpoint.h"
#include "conveyor/formats/hf_checkpoint_testing.h"
#include "conveyor/nn/hf_config.h"
#include "conveyor/nn/layer.h"
#include "conveyor/nn/llama.h"
#include "conveyor/nn/llama_testing.h"

namespace conveyor {
namespace {

LlamaConfig TinyMoe(bool mixtral, QkNorm qk_norm = QkNorm::kHead) {
  LlamaConfig c = TinyLlamaConfig();
  c.layers = 3;
  c.rope_theta = 1e6;
  LlamaMoe moe;
  moe.block.hidden = c.hidden;
  moe.block.experts = 4;
  moe.block.top_k = 2;
  moe.block.expert_units = mixtral ? c.intermediate : 24;
  moe.block.mixtral_names = mixtral;
  moe.prefix = mixtral ? "block_sparse_moe" : "mlp";
  c.moe = moe;
  c.qk_norm = mixtral ? QkNorm::kNone : qk_norm;
  return c;
}

// conveyor's model read from the folder `dir`, its logits (n, T, V) for ids (n, T).
at::Tensor LogitsOfFolder(const std::string& dir, const at::Tensor& ids) {
  HfCheckpoint folder(dir);
  LlamaConfig c = folder.config().llama;
  c.weights = WeightInit::kUndrawn;
  const LayerList layers = BuildLlama(c, 1);
  NamedTensors params;
  for (const auto& layer : layers) {
    for (auto& named : layer->NamedParameters()) params.push_back(std::move(named));
  }
  folder.LoadInto(params, ParameterSpecsOf(layers), TensorParallel{});
  return LogitsOf(layers, ids);
}

struct Case {
  std::string what;
  LlamaConfig config;
};

// The logits of each folder equal the reference's; its config.json reads back as written.
TEST(HfMoeReferenceTest, EachMoeFolderMatchesThePlainPyTorchReference) {
  if (!PythonHasTorch()) GTEST_SKIP() << "/usr/bin/python3 cannot import torch (python3-torch)";
  LlamaConfig qwen_plain = TinyMoe(false);
  qwen_plain.moe->block.renormalize = false;  // norm_topk_prob false
  qwen_plain.moe->sparse_step = 2;            // layer 1 sparse, 0 and 2 dense
  LlamaConfig qwen_dense_layer = TinyMoe(false);
  qwen_dense_layer.moe->dense_layers = {1};  // mlp_only_layers
  LlamaConfig olmoe = TinyMoe(false, QkNorm::kProjection);
  olmoe.moe->block.expert_units = olmoe.intermediate;  // every layer sparse, as OLMoE's
  olmoe.moe->block.renormalize = false;                // its norm_topk_prob
  LlamaConfig qwen2_moe = TinyMoe(false, QkNorm::kNone);
  qwen2_moe.qkv_bias = true;
  qwen2_moe.moe->block.shared_units = 20;
  qwen2_moe.moe->block.shared_gate = true;
  qwen2_moe.moe->block.renormalize = false;
  qwen2_moe.moe->dense_layers = {1};
  LlamaConfig qwen2 = TinyMoe(false, QkNorm::kNone);  // a dense Qwen2: a Llama with biases
  qwen2.moe.reset();
  qwen2.qkv_bias = true;
  for (const Case& test :
       std::vector<Case>{{"mixtral", TinyMoe(true)},
                         {"qwen3_moe, norm_topk_prob", TinyMoe(false)},
                         {"qwen3_moe, plain gates, step 2", qwen_plain},
                         {"qwen3_moe, a dense layer", qwen_dense_layer},
                         {"olmoe", olmoe},
                         {"qwen2_moe, a shared expert, a dense layer", qwen2_moe},
                         {"qwen2", qwen2}}) {
    SCOPED_TRACE(test.what);
    std::map<std::string, at::Tensor> weights = LlamaWeights(test.config, 23);
    at::Generator gen = LayerInitGenerator(5, 0);
    for (auto& [name, w] : weights) {  // norms not all ones and biases not 0, to be seen
      if (name.find("norm") != std::string::npos || name.find("bias") != std::string::npos) {
        w = w + 0.3 * at::randn(w.sizes(), gen);
      }
    }
    const std::string dir = ::testing::TempDir() + "conveyor_moe_ref_" +
                            std::to_string(::getpid()) + "_" +
                            std::to_string(std::hash<std::string>()(test.what));
    RemoveTree(dir);
    std::filesystem::create_directories(dir);
    WriteHfLlamaFolder(dir, test.config, weights, at::kFloat, /*shards=*/true);
    const HfModelConfig read = ReadHfModelConfig(dir + "/config.json");
    EXPECT_EQ(read.type, test.what.substr(0, test.what.find(',')));
    ASSERT_EQ(read.llama.moe.has_value(), test.config.moe.has_value());
    if (test.config.moe) {
      const MoeConfig& block = read.llama.moe->block;
      EXPECT_EQ(block.experts, 4);
      EXPECT_EQ(block.expert_units, test.config.moe->block.expert_units);
      EXPECT_EQ(block.renormalize, test.config.moe->block.renormalize);
      EXPECT_EQ(block.shared_units, test.config.moe->block.shared_units);
      EXPECT_EQ(block.shared_gate, test.config.moe->block.shared_gate);
      EXPECT_EQ(read.llama.moe->sparse_step, test.config.moe->sparse_step);
      EXPECT_EQ(read.llama.moe->dense_layers, test.config.moe->dense_layers);
    }
    EXPECT_TRUE(read.llama.qk_norm == test.config.qk_norm);
    EXPECT_EQ(read.llama.qkv_bias, test.config.qkv_bias);
    const at::Tensor ids = RandomIds(test.config, 2, 11, 17);
    const at::Tensor expected = ReferenceLogits(dir, ids);
    ASSERT_TRUE(expected.defined());
    const at::Tensor got = LogitsOfFolder(dir, ids);
    ASSERT_EQ(got.sizes(), expected.sizes());
    EXPECT_LE(RelativeError(got, expected), 1e-5);
    RemoveTree(dir);
  }
}

// A folder whose experts are missing or misshaped is refused before anything is read, and
// an MoE layout no Hugging Face model has is refused when written.
TEST(HfMoeReferenceTest, MissingExpertsAndLayoutsWithoutAFolderAreRefused) {
  const LlamaConfig c = TinyMoe(true);
  std::map<std::string, at::Tensor> weights = LlamaWeights(c, 3);
  weights.erase("model.layers.2.block_sparse_moe.experts.3.w2.weight");
  const std::string dir =
      ::testing::TempDir() + "conveyor_moe_missing_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  WriteHfLlamaFolder(dir, c, weights, at::kFloat, /*shards=*/false);
  try {
    HfCheckpoint folder(dir);
    FAIL() << "a folder without an expert's weight was opened";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("experts.3.w2.weight"), std::string::npos) << e.what();
  }
  RemoveTree(dir);
  LlamaConfig shared = TinyMoe(false);
  shared.moe->block.shared_units = 8;
  EXPECT_THROW(HfLlamaConfigJson(shared, "float32"), UserError);
  LlamaConfig biased = TinyMoe(true);  // selection biases: no folder keeps them
  biased.moe->block.bias_rate = 0.01;
  EXPECT_THROW(HfLlamaConfigJson(biased, "float32"), UserError);
}

}  // namespace
}  // namespace conveyor
