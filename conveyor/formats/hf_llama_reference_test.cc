// conveyor's Llama (conveyor/nn/llama.h) against an independent plain-PyTorch implementation
// of Hugging Face's Llama (testdata/reference/llama.py), through a Hugging Face folder written
// here: the test lives with the folder's writer, above the models' layer.
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <string>

#include "conveyor/common/remove_tree.h"
#include "conveyor/formats/hf_checkpoint_testing.h"
#include "conveyor/nn/layer.h"
#include "conveyor/nn/llama.h"

namespace conveyor {
namespace {

using Named = std::map<std::string, at::Tensor>;

LlamaConfig TinyLlama() {
  LlamaConfig c;
  c.vocab = 48;
  c.hidden = 32;
  c.intermediate = 40;
  c.heads = 4;
  c.kv_heads = 2;
  c.layers = 2;
  c.max_seq_len = 16;
  c.rope_theta = 500000;
  return c;
}

Named Parameters(const LayerList& layers) {
  Named named;
  for (const auto& layer : layers) {
    for (const auto& [name, p] : layer->NamedParameters()) named[name] = p.detach();
  }
  return named;
}

// The model's logits (n, T, V) for ids (n, T), without gradients.
at::Tensor Logits(const LayerList& layers, const at::Tensor& ids) {
  at::NoGradGuard no_grad;
  MicroBatch mb;
  mb.inputs = ids;
  mb.targets = at::zeros_like(ids);
  LayerStack stack(layers);
  return stack.Forward(ids, mb);
}

at::Tensor RandomIds(const LlamaConfig& c, int64_t n, int64_t t, uint64_t seed) {
  at::Generator gen = LayerInitGenerator(seed, 0);
  return at::randint(c.vocab, {n, t}, gen, at::kLong);
}

// The logits equal those of an independent plain-PyTorch implementation of Hugging Face's
// Llama (testdata/reference/llama.py) on the same weights, written as a Hugging Face
// checkpoint folder (config.json and model.safetensors), tied and untied.
TEST(HfLlamaReferenceTest, MatchesThePlainPyTorchReference) {
  if (!PythonHasTorch()) GTEST_SKIP() << "/usr/bin/python3 cannot import torch (python3-torch)";
  for (bool tied : {false, true}) {
    SCOPED_TRACE(tied ? "tied" : "untied");
    LlamaConfig c = TinyLlama();
    c.tie_embeddings = tied;
    c.layers = 3;
    const LayerList model = BuildLlama(c, 11);
    const std::string dir = ::testing::TempDir() + "conveyor_llama_ref_" +
                            std::to_string(::getpid()) + (tied ? "_tied" : "_untied");
    std::filesystem::create_directories(dir);
    WriteHfLlamaFolder(dir, c, Parameters(model), at::kFloat, /*shards=*/false);
    const at::Tensor ids = RandomIds(c, 2, 13, 17);
    const at::Tensor expected = ReferenceLogits(dir, ids);
    ASSERT_TRUE(expected.defined());
    const at::Tensor got = Logits(model, ids);
    ASSERT_EQ(got.sizes(), expected.sizes());
    const double error =
        (got - expected).abs().max().item<double>() / expected.abs().max().item<double>();
    EXPECT_LE(error, 1e-5);
    RemoveTree(dir);
  }
}

}  // namespace
}  // namespace conveyor
