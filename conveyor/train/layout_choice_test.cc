#include "conveyor/train/layout_choice.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "conveyor/common/error.h"
#include "conveyor/train/layer_profile.h"
#include "conveyor/train/train_testing.h"

namespace conveyor {
namespace {

// From given costs: nothing is timed, and the choice is the plan's first layout the trainer
// runs, with the plan's numbers and the request as planned.
TEST(LayoutChoiceTest, GivenCostsChooseThePlansFirstLayoutTheTrainerRuns) {
  TrainConfig config = TinyGpt();
  config.device = DeviceKind::kCpu;
  config.memory_per_rank = 1 << 30;
  const LayerCostTable costs = ProfileLayerKinds(config, {1, 2}, /*rounds=*/1, /*ranks=*/2);
  bool timed = false;
  const LayoutChoice choice = ChooseLayout(config, 2, costs, [&](size_t) { timed = true; });
  EXPECT_FALSE(timed);
  EXPECT_FALSE(choice.gpu);
  EXPECT_EQ(choice.limit, 1 << 30);
  EXPECT_GE(choice.data_bytes, 0);
  EXPECT_DOUBLE_EQ(choice.request.memory_per_rank,
                   kPlannedShare * choice.limit - choice.data_bytes);
  EXPECT_EQ(choice.request.world, 2);
  EXPECT_EQ(choice.request.global_batch, config.batch_size);
  ASSERT_LT(choice.chosen, choice.plan.best.size());
  const PlanCandidate& best = choice.best();
  EXPECT_EQ(choice.config.dp * choice.config.tp * choice.config.pp, 2);
  EXPECT_EQ(choice.config.dp, best.dp);
  EXPECT_EQ(choice.config.pp, best.pp);
  EXPECT_EQ(choice.config.schedule, best.schedule);
  EXPECT_EQ(choice.config.microbatches, best.microbatches);
  EXPECT_EQ(choice.config.recompute, best.recompute);
  EXPECT_EQ(choice.config.stage_layers, best.stage_layers);
  // A limit no layout fits under: the nearest miss is named.
  config.memory_per_rank = 1 << 10;
  try {
    ChooseLayout(config, 2, costs, [](size_t) {});
    ADD_FAILURE() << "no error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("no layout fits"), std::string::npos) << e.what();
  }
}

// A Mixture-of-Experts model (dense and sparse blocks): both kinds timed, every layout with
// the experts spread over data-parallel ranks that divide them priced with their memory over
// ep, and the choice's ep one the trainer runs.
TEST(LayoutChoiceTest, AMixtureOfExpertsModelIsPlannedWithItsExpertParallelSize) {
  TrainConfig config = TinyLlama();
  config.device = DeviceKind::kCpu;
  config.memory_per_rank = 1 << 30;
  config.model.layers = 4;
  config.model.experts = 4;
  config.model.top_k = 2;
  config.model.expert_units = 64;
  config.model.moe_sparse_step = 2;  // blocks 1 and 3 sparse
  const LayerCostTable costs = ProfileLayerKinds(config, {1, 2}, /*rounds=*/1, /*ranks=*/4);
  ASSERT_EQ(costs.model.experts, 4);
  EXPECT_EQ(costs.model.dense_blocks, (std::vector<int64_t>{0, 2}));
  ASSERT_EQ(costs.sparse_block.at.size(), 2u);
  EXPECT_GT(costs.sparse_block.params, costs.block.params);  // 4 experts of 64 against 96 units
  const LayoutChoice choice = ChooseLayout(config, 4, costs, [](size_t) {});
  std::map<std::tuple<int, int, int, Recompute>, std::map<int, double>> peaks;
  for (const PlanCandidate& c : choice.plan.best) {
    EXPECT_EQ(c.tp, 1);
    EXPECT_EQ(c.dp % c.ep, 0);
    peaks[{c.dp, c.pp, c.microbatches, c.recompute}][c.ep] = c.peak_bytes;  // pp 1: 1 schedule
  }
  // dp 4 x pp 1: ep 1, 2 and 4, the experts' weights and state over ep.
  const auto& spread = peaks[{4, 1, 1, Recompute::kNone}];
  ASSERT_EQ(spread.size(), 3u) << "ep 1, 2, 4 at dp 4";
  EXPECT_GT(spread.at(1), spread.at(2));
  EXPECT_GT(spread.at(2), spread.at(4));
  EXPECT_TRUE(choice.request.pairs_at_once);
  EXPECT_EQ(choice.config.ep, choice.best().ep);
  EXPECT_NO_THROW(choice.config.Validate());
}

}  // namespace
}  // namespace conveyor
