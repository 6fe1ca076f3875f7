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

TEST(TransformerSpecTest, CountsAMixtureOfExpertsAllItsExpertsAndComputesTopK) {
  // Mixtral 8x7B: 46.7 B parameters, 12.9 B of them a token meets (2 of 8 experts).
  TransformerSpec mixtral{.layers = 32,
                          .hidden = 4096,
                          .heads = 32,
                          .kv_heads = 8,
                          .intermediate = 14336,
                          .vocab = 32000,
                          .seq_len = 4096,
                          .gated_mlp = true,
                          .experts = 8,
                          .top_k = 2};
  EXPECT_NEAR(mixtral.Params() / 1e9, 46.70, 0.01);
  EXPECT_DOUBLE_EQ(mixtral.ExpertParams(), 8 * 3.0 * 4096 * 14336);
  const double active = mixtral.Params() - 32 * mixtral.ExpertParams() * 6 / 8;
  EXPECT_NEAR(active / 1e9, 12.88, 0.01);
  EXPECT_DOUBLE_EQ(
      mixtral.BlockForwardFlops(true),
      2 * (mixtral.BlockParams(true) - mixtral.ExpertParams() * 6 / 8) + 4.0 * 4096 * 4096);
  EXPECT_EQ(mixtral.SparseBlocks(), 32);
  EXPECT_FALSE(mixtral.SplitsOver(2));  // experts at tp 1 only
  EXPECT_TRUE(mixtral.SplitsOver(1));
  // A shared expert with its gate, smaller experts, and dense blocks among the sparse ones.
  mixtral.expert_units = 1024;
  mixtral.shared_units = 2048;
  mixtral.dense_blocks = {0, 5};
  EXPECT_EQ(mixtral.SparseBlocks(), 30);
  EXPECT_FALSE(mixtral.IsSparse(5));
  EXPECT_TRUE(mixtral.IsSparse(6));
  const double attention = 2.0 * 4096 * 4096 + 2.0 * 4096 * 1024;
  EXPECT_DOUBLE_EQ(mixtral.BlockParams(true),
                   attention + 4096.0 * 8 + 8 * 3.0 * 4096 * 1024 + 3.0 * 4096 * 2048 + 4096);
  EXPECT_DOUBLE_EQ(mixtral.BlockParams(false), attention + 3.0 * 4096 * 14336);
  EXPECT_DOUBLE_EQ(mixtral.Params(), 30 * mixtral.BlockParams(true) +
                                         2 * mixtral.BlockParams(false) + 2.0 * 32000 * 4096);
}

}  // namespace
}  // namespace conveyor
