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
#include "conveyor/nn/llama_testing.h"

namespace conveyor {
namespace {

// The logits equal those of an independent plain-PyTorch implementation of Hugging Face's
// Llama (testdata/reference/llama.py) on the same weights, written as a Hugging Face
// checkpoint folder (config.json and model.safetensors), tied and untied.
TEST(HfLlamaReferenceTest, MatchesThePlainPyTorchReference) {
  if (!PythonHasTorch()) GTEST_SKIP() << "/usr/bin/python3 cannot import torch (python3-torch)";
  for (bool tied : {false, true}) {
    SCOPED_TRACE(tied ? "tied" : "untied");
    LlamaConfig c = TinyLlamaConfig();
    c.tie_embeddings = tied;
    c.layers = 3;
    const LayerList model = BuildLlama(c, 11);
    const std::string dir = ::testing::TempDir() + "conveyor_llama_ref_" +
                            std::to_string(::getpid()) + (tied ? "_tied" : "_untied");
    std::filesystem::create_directories(dir);
    WriteHfLlamaFolder(dir, c, ParametersByName(model), at::kFloat, /*shards=*/false);
    const at::Tensor ids = RandomIds(c, 2, 13, 17);
    const at::Tensor expected = ReferenceLogits(dir, ids);
    ASSERT_TRUE(expected.defined());
    const at::Tensor got = LogitsOf(model, ids);
    ASSERT_EQ(got.sizes(), expected.sizes());
    const double error =
        (got - expected).abs().max().item<double>() / expected.abs().max().item<double>();
    EXPECT_LE(error, 1e-5);
    RemoveTree(dir);
  }
}

}  // namespace
}  // namespace conveyor
