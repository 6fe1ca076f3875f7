#include "conveyor/sim/transformer_spec.h"

#include <gtest/gtest.h>

namespace conveyor {
namespace {

TEST(TransformerSpecTest, CountsTheParametersOfGptAndLlama) {
  TransformerSpec gpt{.layers = 12, .hidden = 768, .heads = 12, .vocab = 50257, .seq_len = 1024};
  EXPECT_DOUBLE_EQ(gpt.BlockParams(), 12.0 * 768 * 768);  // attention 4 C^2, MLP 8 C^2
  // Llama 2 7B: 6.74 B parameters (untied head).
  TransformerSpec llama{.layers = 32,
                        .hidden = 4096,
                        .heads = 32,
                        .intermediate = 11008,
                        .vocab = 32000,
                        .seq_len = 4096,
                        .gated_mlp = true};
  EXPECT_NEAR(llama.Params() / 1e9, 6.74, 0.01);
  // Grouped keys and values: 8 of 32 heads shrink k and v to a quarter.
  llama.kv_heads = 8;
  EXPECT_DOUBLE_EQ(llama.BlockParams(), 2.0 * 4096 * 4096 + 2.0 * 4096 * 1024 + 3.0 * 4096 * 11008);
  // Without a width, the one default rule for gated blocks: what the trainer builds.
  llama.intermediate = 0;
  EXPECT_EQ(llama.mlp(), 10928);
  EXPECT_EQ(GatedMlpUnits(64), 176);
  EXPECT_EQ((TransformerSpec{.hidden = 96}).mlp(), 384);  // GPT: 4 x hidden
  EXPECT_DOUBLE_EQ(gpt.TrainFlopsPerToken(),
                   3 * (12 * (2 * 12.0 * 768 * 768 + 4.0 * 1024 * 768) + 2.0 * 768 * 50257));
}

}  // namespace
}  // namespace conveyor
