#include "conveyor/train/measured_costs.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "conveyor/train/world_collectives.h"

namespace conveyor {

CostModel MeasuredCosts(const Trainer& trainer) {
  // Seconds and counts of F, B, I, W per stage; stages live on different ranks, so the
  // ranks' tables are summed.
  constexpr Op kOps[] = {Op::kForward, Op::kBackward, Op::kBackwardInput, Op::kBackwardWeight};
  const int stages = trainer.model().program().layout.num_stages();
  at::Tensor table = at::zeros({stages, 4, 2}, at::kDouble);
  for (const auto& [key, time] : trainer.measurements().op_times()) {
    for (int k = 0; k < 4; ++k) {
      if (key.second != kOps[k]) continue;
      table[key.first][k][0] = time.seconds;
      table[key.first][k][1] = static_cast<double>(time.count);
    }
  }
  table = SumOverRanks(trainer.model().pipeline_group(), table);
  CostModel costs;
  costs.comm_latency = trainer.hop_s();
  for (int s = 0; s < stages; ++s) {
    auto mean = [&](int k) {
      const double count = table[s][k][1].item<double>();
      return count > 0 ? table[s][k][0].item<double>() / count : -1.0;
    };
    StageCost c;
    c.f = std::max(0.0, mean(0));
    c.b = mean(1);
    c.i = std::max(0.0, mean(2));
    c.w = std::max(0.0, mean(3));
    costs.stages.push_back(c);
  }
  return costs;
}

SimResult PredictFromMeasuredCosts(const Trainer& trainer) {
  SimResult result = Simulate(trainer.model().program(), MeasuredCosts(trainer), SimOptions{1});
  result.timeline.time_unit = TimeUnit::kSeconds;
  return result;
}

}  // namespace conveyor
