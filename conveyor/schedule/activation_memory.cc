#include "conveyor/schedule/activation_memory.h"

#include <algorithm>

#include "conveyor/common/error.h"

namespace conveyor {

void ForEachHalf(const std::vector<Action>& actions, const std::function<void(Op, int)>& apply) {
  for (const Action& a : actions) {
    if (a.op == Op::kOverlapFB) {
      apply(Op::kForward, a.stage);
      apply(a.overlap_op, a.BackwardHalf().stage);
    } else {
      apply(a.op, a.stage);
    }
  }
}

std::vector<double> PeakActivations(const Program& program, double mem_b, double mem_w) {
  return PeakActivations(program, std::vector<double>(program.layout.num_stages(), mem_b),
                         mem_b > 0 ? mem_w / mem_b : 0);
}

std::vector<double> PeakActivations(const Program& program, const std::vector<double>& mem_b,
                                    double w_share) {
  CONVEYOR_CHECK(static_cast<int>(mem_b.size()) == program.layout.num_stages())
      << "activation sizes for " << mem_b.size() << " stages, the program has "
      << program.layout.num_stages();
  std::vector<double> peaks;
  for (const auto& actions : program.ranks) {
    double now = 0, peak = 0;
    auto apply = [&](Op op, int stage) {
      const double b = mem_b[stage], w = w_share * b;
      switch (op) {
        case Op::kForward:
          now += b;
          break;
        case Op::kBackward:
          now -= b;
          break;
        case Op::kBackwardInput:
          now -= b - w;
          break;
        case Op::kBackwardWeight:
          now -= w;
          break;
        default:
          break;
      }
      peak = std::max(peak, now);
    };
    ForEachHalf(actions, apply);
    peaks.push_back(peak);
  }
  return peaks;
}

std::vector<int> PeakInFlight(const Program& program) {
  std::vector<int> peaks;
  for (double peak : PeakActivations(program, 1, 1)) peaks.push_back(static_cast<int>(peak));
  return peaks;
}

}  // namespace conveyor
