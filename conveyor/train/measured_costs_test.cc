#include "conveyor/train/measured_costs.h"

#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <vector>

#include "conveyor/train/train_testing.h"

namespace conveyor {
namespace {

TEST(MeasuredCostsTest, EveryRankGetsEveryStagesMeasuredCosts) {
  at::set_num_threads(1);
  TrainConfig c = TinyGpt();
  c.pp = 2;
  c.schedule = "1f1b";
  std::vector<CostModel> costs(2);
  std::vector<SimResult> predicted(2);
  std::vector<double> hop_s(2);
  TrainOnThreads(c, [&](Trainer& t, Transport&) {
    costs[t.model().rank()] = MeasuredCosts(t);
    predicted[t.model().rank()] = PredictFromMeasuredCosts(t);
    hop_s[t.model().rank()] = t.hop_s();
  });
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(costs[r].stages.size(), 2u) << r;
    EXPECT_GT(hop_s[r], 0);
    EXPECT_EQ(costs[r].comm_latency, hop_s[r]);
    for (int s = 0; s < 2; ++s) {
      const StageCost& cost = costs[r].stages[s];
      // 1F1B runs F and the full B; I and W never run alone.
      EXPECT_GT(cost.f, 0) << "stage " << s;
      EXPECT_GT(cost.b, 0) << "stage " << s;
      EXPECT_EQ(cost.i, 0) << "stage " << s;
      EXPECT_EQ(cost.w, 0) << "stage " << s;
      // The same table on both ranks, though each timed only its own stage.
      EXPECT_EQ(cost.f, costs[0].stages[s].f);
      EXPECT_EQ(cost.b, costs[0].stages[s].b);
    }
    EXPECT_GT(predicted[r].bubble_fraction, 0);
    EXPECT_LT(predicted[r].bubble_fraction, 1);
    EXPECT_GT(predicted[r].makespan, 0);
    EXPECT_EQ(predicted[r].timeline.time_unit, TimeUnit::kSeconds);
    EXPECT_EQ(predicted[r].makespan, predicted[0].makespan);
  }
}

}  // namespace
}  // namespace conveyor
