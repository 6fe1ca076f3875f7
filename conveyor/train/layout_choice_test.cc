#include "conveyor/train/layout_choice.h"

#include <gtest/gtest.h>

#include <string>

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

// A Mixture-of-Experts model: the planner does not price its experts or their all-to-all, so
// --auto is refused before anything is timed, saying what to give instead.
TEST(LayoutChoiceTest, AMixtureOfExpertsModelIsRefusedBeforeAnythingIsTimed) {
  TrainConfig config = TinyLlama();
  config.model.experts = 4;
  bool timed = false;
  try {
    ChooseLayout(config, 2, std::nullopt, [&](size_t) { timed = true; });
    ADD_FAILURE() << "no error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("--ep"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(timed);
}

}  // namespace
}  // namespace conveyor
