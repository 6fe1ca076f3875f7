#include "conveyor/train/measured_costs.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "conveyor/train/world_collectives.h"

namespace conveyor {

CostModel MeasuredCosts(const Trainer& trainer) {
  // Seconds, counts and work of F, B, I, W per stage; stages live on different ranks, so the
  // ranks' tables are summed.
  constexpr Op kOps[] = {Op::kForward, Op::kBackward, Op::kBackwardInput, Op::kBackwardWeight};
  const int stages = trainer.model().program().layout.num_stages();
  at::Tensor table = at::zeros({stages, 4, 3}, at::kDouble);
  for (const auto& [key, time] : trainer.measurements().op_times()) {
    for (int k = 0; k < 4; ++k) {
      if (key.second != kOps[k]) continue;
      table[key.first][k][0] = time.seconds;
      table[key.first][k][1] = static_cast<double>(time.count);
      table[key.first][k][2] = time.work;
    }
  }
  table = SumOverRanks(trainer.model().pipeline_group(), table);
  // Handing messages to the transport, a step: seconds and messages; compute and work.
  const Program& program = trainer.model().program();
  const RankReport means = trainer.measurements().Means(trainer.model().rank());
  double messages = 0;
  for (const Action& a : program.ranks[trainer.model().pipeline_rank()]) {
    if (IsCompute(a.op)) messages += static_cast<double>(TransfersOf(program.layout, a).size());
  }
  const at::Tensor posting = SumOverRanks(
      trainer.model().pipeline_group(),
      at::tensor(std::vector<double>{means.post_s, messages, means.compute_s, means.work_s},
                 at::kDouble));
  CostModel costs;
  costs.comm_latency = trainer.hop_s();
  // Ranks sharing cores: what each compute held, and the simulator shares the cores too.
  const bool shared = trainer.sharing().Shares();
  if (shared) costs.sharing = trainer.sharing();
  const double sent = posting[1].item<double>(), compute = posting[2].item<double>();
  if (sent > 0) {
    // Posting shares the cores as computing does: its work in the same proportion.
    const double busy = compute + posting[0].item<double>();
    const double work_share = shared && busy > 0 ? posting[3].item<double>() / busy : 1;
    costs.post = posting[0].item<double>() / sent * work_share;
  }
  for (int s = 0; s < stages; ++s) {
    auto mean = [&](int k) {
      const double count = table[s][k][1].item<double>();
      return count > 0 ? table[s][k][shared ? 2 : 0].item<double>() / count : -1.0;
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
