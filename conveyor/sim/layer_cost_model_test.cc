#include "conveyor/sim/layer_cost_model.h"

#include <gtest/gtest.h>

#include <map>
#include <utility>
#include <vector>

#include "conveyor/sim/auto_planner.h"
#include "conveyor/sim/auto_planner_testing.h"

namespace conveyor {
namespace {

// 2 blocks of 64 wide, 16 tokens a sequence: 4 layers with the embedding and the head.
TransformerSpec Tiny() {
  return TransformerSpec{.layers = 2, .hidden = 64, .heads = 4, .vocab = 256, .seq_len = 16};
}

LayerCostEstimate FromFlops(const TransformerSpec& m, const LayerCostLayout& layout) {
  return EstimateLayerCosts(m, nullptr, 1e12, layout);
}

TEST(LayerCostModelTest, FlopCountsPriceEachLayerAtTheDevicesRate) {
  const TransformerSpec m = Tiny();
  const double bt = 2 * 16, c = 64, v = 256;  // two sequences' tokens
  const LayerCostEstimate e = FromFlops(m, {.sequences = 2});
  ASSERT_EQ(e.layers.size(), 4u);
  ASSERT_EQ(e.params.size(), 4u);
  EXPECT_EQ(e.layers[0].forward_s, 0) << "the embedding computes nothing";
  const LayerSample& block = e.layers[1];
  EXPECT_DOUBLE_EQ(block.forward_s, bt * m.BlockForwardFlops() / 1e12);
  EXPECT_DOUBLE_EQ(block.input_s, block.forward_s);
  EXPECT_DOUBLE_EQ(block.weight_s, block.forward_s);
  EXPECT_DOUBLE_EQ(block.backward_s, 2 * block.forward_s);
  EXPECT_DOUBLE_EQ(block.activation_bytes, bt * c * 34);
  EXPECT_DOUBLE_EQ(block.weight_bytes, bt * c * 32);
  EXPECT_DOUBLE_EQ(e.layers[3].forward_s, bt * 2 * c * v / 1e12);
  EXPECT_DOUBLE_EQ(e.layers[3].activation_bytes, bt * v * 4) << "fp32 logits";
  EXPECT_DOUBLE_EQ(e.params[0], v * c);
  EXPECT_DOUBLE_EQ(e.params[1], m.BlockParams());
  EXPECT_DOUBLE_EQ(e.params[3], v * c);
  EXPECT_EQ(e.expert_params, (std::vector<double>{0, 0, 0, 0}));
  EXPECT_EQ(e.input_bytes, (std::vector<double>{0, bt * c * 2, bt * c * 2, bt * c * 2}));
}

// Under TP a block's 24 of 34 parts split, 10 stay whole; sequence parallelism splits those
// too, and a stage's input.
TEST(LayerCostModelTest, TensorAndSequenceParallelismSplitTheActivations) {
  const TransformerSpec m = Tiny();
  const double bt = 2 * 16, c = 64;
  const LayerCostEstimate one = FromFlops(m, {.sequences = 2});
  const LayerCostEstimate tp = FromFlops(m, {.tp = 2, .sequences = 2});
  const LayerCostEstimate sp = FromFlops(m, {.tp = 2, .sequences = 2, .sequence_parallel = true});
  EXPECT_DOUBLE_EQ(tp.layers[1].forward_s, one.layers[1].forward_s / 2);
  EXPECT_DOUBLE_EQ(tp.params[1], one.params[1] / 2);
  EXPECT_DOUBLE_EQ(tp.layers[1].activation_bytes, bt * c * (10 + 12));
  EXPECT_DOUBLE_EQ(sp.layers[1].activation_bytes, bt * c * 34 / 2);
  EXPECT_DOUBLE_EQ(sp.layers[1].weight_bytes, bt * c * 32 / 2);
  EXPECT_DOUBLE_EQ(tp.input_bytes[1], bt * c * 2);
  EXPECT_DOUBLE_EQ(sp.input_bytes[1], bt * c * 2 / 2);
  EXPECT_DOUBLE_EQ(sp.layers[1].forward_s, tp.layers[1].forward_s);
}

TEST(LayerCostModelTest, FullRecomputationRunsTheForwardAgainBeforeTheBackward) {
  const LayerCostEstimate keep = FromFlops(Tiny(), {.sequences = 2});
  const LayerCostEstimate full = FromFlops(Tiny(), {.sequences = 2, .recompute = Recompute::kFull});
  for (size_t l = 0; l < keep.layers.size(); ++l) {
    EXPECT_DOUBLE_EQ(full.layers[l].forward_s, keep.layers[l].forward_s) << l;
    EXPECT_DOUBLE_EQ(full.layers[l].input_s, keep.layers[l].input_s + keep.layers[l].forward_s);
    EXPECT_DOUBLE_EQ(full.layers[l].backward_s,
                     keep.layers[l].backward_s + keep.layers[l].forward_s);
    EXPECT_DOUBLE_EQ(full.layers[l].weight_s, keep.layers[l].weight_s);
  }
}

TEST(LayerCostModelTest, ContextParallelRanksComputeAShareOfEachSequence) {
  const LayerCostEstimate whole = FromFlops(Tiny(), {.sequences = 2});
  const LayerCostEstimate half = FromFlops(Tiny(), {.cp = 2, .sequences = 2});
  for (size_t l = 0; l < whole.layers.size(); ++l) {
    EXPECT_DOUBLE_EQ(half.layers[l].forward_s, whole.layers[l].forward_s / 2) << l;
    EXPECT_DOUBLE_EQ(half.layers[l].activation_bytes, whole.layers[l].activation_bytes / 2) << l;
    EXPECT_DOUBLE_EQ(half.input_bytes[l], whole.input_bytes[l] / 2) << l;
    EXPECT_DOUBLE_EQ(half.params[l], whole.params[l]) << l;
  }
}

// A sparse block computes the parameters a token meets and holds more than a dense one; its
// experts' parameters are what expert parallelism divides.
TEST(LayerCostModelTest, FlopCountsPriceASparseBlockByWhatATokenMeets) {
  TransformerSpec m = Tiny();
  m.gated_mlp = true;
  m.experts = 4;
  m.top_k = 2;
  m.dense_blocks = {0};  // block 1 sparse
  const LayerCostEstimate e = FromFlops(m, {.sequences = 1});
  const LayerSample &dense = e.layers[1], &sparse = e.layers[2];
  EXPECT_DOUBLE_EQ(sparse.forward_s / dense.forward_s,
                   m.BlockForwardFlops(true) / m.BlockForwardFlops());
  EXPECT_GT(sparse.activation_bytes, dense.activation_bytes);
  EXPECT_EQ(e.expert_params[1], 0);
  EXPECT_DOUBLE_EQ(e.expert_params[2], m.ExpertParams());
  EXPECT_DOUBLE_EQ(e.params[2], m.BlockParams(true));
}

TEST(LayerCostModelTest, MeasuredCostsAreTheTablesAndSelectiveIsNeverFaster) {
  const LayerCostTable t = MeasuredTestTable();
  const LayerCostEstimate e = EstimateLayerCosts(t.model, &t, 0, {.sequences = 1});
  ASSERT_EQ(e.layers.size(), 8u);
  EXPECT_DOUBLE_EQ(e.layers[1].forward_s, 1e-3);
  EXPECT_DOUBLE_EQ(e.layers[1].backward_s, 2e-3) << "I + W where none was measured";
  EXPECT_DOUBLE_EQ(e.layers[1].activation_bytes, 1e6);
  EXPECT_DOUBLE_EQ(e.layers[7].activation_bytes, 2e6);
  EXPECT_DOUBLE_EQ(e.input_bytes[1], 64 * 64 * 4) << "a sequence's fp32 activations";
  const LayerCostEstimate selective =
      EstimateLayerCosts(t.model, &t, 0, {.sequences = 1, .recompute = Recompute::kSelective});
  EXPECT_DOUBLE_EQ(selective.layers[1].forward_s, 1e-3);
  EXPECT_DOUBLE_EQ(selective.layers[1].input_s, 1.5e-3);
  EXPECT_DOUBLE_EQ(selective.layers[1].activation_bytes, 5e5);
  // Between the sizes timed, on the line.
  EXPECT_DOUBLE_EQ(EstimateLayerCosts(t.model, &t, 0, {.sequences = 2}).layers[1].forward_s, 2e-3);
}

// Without a shard measured at that tp: the whole layer's times over tp, its bytes as
// Korthikanti et al. split them (the embedding's output whole on every rank).
TEST(LayerCostModelTest, AnUnmeasuredShardIsTheWholeLayerOverTp) {
  const LayerCostTable t = MeasuredTestTable();
  const LayerCostEstimate e = EstimateLayerCosts(t.model, &t, 0, {.tp = 2, .sequences = 1});
  EXPECT_DOUBLE_EQ(e.layers[1].forward_s, 0.5e-3);
  EXPECT_DOUBLE_EQ(e.layers[1].activation_bytes, 1e6 * (10 + 12) / 34);
  EXPECT_DOUBLE_EQ(e.layers[0].activation_bytes, 1e4);
  const LayerCostEstimate sp =
      EstimateLayerCosts(t.model, &t, 0, {.tp = 2, .sequences = 1, .sequence_parallel = true});
  EXPECT_DOUBLE_EQ(sp.layers[1].activation_bytes, 1e6 / 2);
  EXPECT_DOUBLE_EQ(sp.layers[0].activation_bytes, 1e4 / 2);
  EXPECT_DOUBLE_EQ(sp.input_bytes[1], 64 * 64 * 4 / 2);
}

// A tensor-parallel rank's shard costs what the profile measured of it where it did, not the
// whole layer's 1 / tp: norms, residuals and each operation's fixed cost are not split.
TEST(LayerCostModelTest, ATensorParallelShardCostsWhatWasMeasuredOfIt) {
  // The step of 1x2x1 (two TP ranks, one micro-batch of 2) and its peak, with `shards`.
  auto planned = [](const std::map<int, MeasuredKinds>& shards) {
    LayerCostTable t = MeasuredTestTable();
    t.tp_shards = shards;
    AutoPlanRequest r = MeasuredRequest(t, 2, 2);
    r.tp = 2;
    for (const PlanCandidate& c : PlanAuto(r).best) {
      if (c.microbatches == 1 && c.recompute == Recompute::kNone)
        return std::pair(c.step_s, c.peak_bytes);
    }
    return std::pair(-1.0, -1.0);
  };
  // The whole layers with their times scaled by `by` and their bytes kept.
  auto shard = [](double by) {
    MeasuredKinds kinds = MeasuredTestTable();
    for (MeasuredLayer MeasuredKinds::*kind : kMeasuredKinds) {
      for (LayerSample& s : (kinds.*kind).at) {
        s.forward_s *= by, s.input_s *= by, s.weight_s *= by, s.backward_s *= by;
      }
    }
    return kinds;
  };
  const auto [divided, divided_peak] = planned({});
  ASSERT_GT(divided, 0);
  const auto [half, whole_bytes_peak] = planned({{2, shard(0.5)}});
  EXPECT_NEAR(half, divided, 1e-12) << "a shard measured at half the time is the 1 / tp model";
  EXPECT_GT(whole_bytes_peak, divided_peak) << "its bytes as measured: the whole layer's here";
  EXPECT_GT(planned({{2, shard(0.8)}}).first, divided * 1.2);
  EXPECT_NEAR(planned({{4, shard(0.8)}}).first, divided, 1e-12) << "no shard of tp 2: 1 / tp";
}

TEST(LayerCostModelTest, MeasuredSparseBlocksCostWhatWasMeasuredOfThem) {
  LayerCostTable t = MeasuredTestTable();
  t.model.gated_mlp = true;
  t.model.experts = 4;
  t.model.top_k = 1;
  t.model.dense_blocks = {0, 1, 2};  // blocks 3 to 5 sparse
  t.sparse_block = {2e5, {{3e-3, 3e-3, 3e-3, 1e6}, {9e-3, 9e-3, 9e-3, 3e6}}};
  t.sparse_block_selective = t.sparse_block;
  AutoPlanRequest r = MeasuredRequest(t, 1, 1);
  r.schedules = {"1f1b"};
  const AutoPlan plan = PlanAuto(r);
  ASSERT_FALSE(plan.best.empty());
  const PlanCandidate& c = plan.best[0];  // one rank, one sequence, nothing recomputed
  ASSERT_EQ(c.recompute, Recompute::kNone);
  // F + B (I + W) of the embedding, 3 dense blocks, 3 sparse ones and the head.
  EXPECT_NEAR(c.step_s, 2e-5 + 3 * 3e-3 + 3 * 9e-3 + 1.5e-3, 1e-9);
  // Split in two, the sparse blocks weigh three times the dense ones.
  r.pp = 2;
  r.world = 2;
  r.global_batch = 2;
  for (const PlanCandidate& two : PlanAuto(r).best) {
    if (two.recompute == Recompute::kNone) EXPECT_EQ(two.stage_layers, "5,3") << two.schedule;
  }
}

}  // namespace
}  // namespace conveyor
