#include "conveyor/sim/simulator.h"

#include <algorithm>

#include "conveyor/common/error.h"
#include "conveyor/schedule/activation_memory.h"
#include "conveyor/schedule/lower.h"
#include "conveyor/schedule/verify.h"

namespace conveyor {
namespace {

// `steps` back-to-back runs of one program, each with its own Progress holding finish
// times; every rank runs its list once per step, in order.
class Engine {
 public:
  Engine(const Program& program, const CostModel& costs, int steps)
      : program_(program),
        layout_(program.layout),
        costs_(costs),
        steps_(steps),
        progress_(steps, Progress(layout_)) {}

  // Runs all steps. Fills the step-0 timeline and per-rank busy time, and each rank's
  // finish time of every step. Throws DeadlockError when the program cannot complete.
  void Run(SimResult& result) {
    const int p = layout_.num_ranks();
    std::vector<int> step(p, 0);
    std::vector<size_t> pos(p, 0);
    std::vector<double> free(p, 0.0);
    step_end_.assign(steps_, 0.0);
    result.busy.assign(p, 0.0);
    result.timeline.num_ranks = p;
    int ranks_done = 0;
    for (int r = 0; r < p; ++r) {
      if (program_.ranks[r].empty()) ++ranks_done;
    }
    while (ranks_done < p) {
      bool progressed = false;
      for (int r = 0; r < p; ++r) {
        const auto& actions = program_.ranks[r];
        while (step[r] < steps_ && !actions.empty()) {
          const Action& a = actions[pos[r]];
          if (a.op == Op::kOverlapFB && costs_.cost(a.stage).overlap < 0) {
            // No gain from overlapping: the halves run one after the other, each as soon as
            // its own inputs are there.
            double ready_f = 0, ready_b = 0;
            const Action f = a.ForwardHalf(), b = a.BackwardHalf();
            if (!ReadyAt(step[r], f, &ready_f) || !ReadyAt(step[r], b, &ready_b)) break;
            RunOne(r, step[r], f, ready_f, free[r], result);
            RunOne(r, step[r], b, ready_b, free[r], result);
          } else if (IsCompute(a.op)) {
            double ready;
            if (!ReadyAt(step[r], a, &ready)) break;
            RunOne(r, step[r], a, ready, free[r], result);
          }
          progressed = true;
          if (++pos[r] == actions.size()) {
            step_end_[step[r]] = std::max(step_end_[step[r]], free[r]);
            free[r] += costs_.optimizer;
            pos[r] = 0;
            if (++step[r] == steps_) ++ranks_done;
          }
        }
      }
      if (!progressed) {
        Lower(program_);  // throws DeadlockError naming every blocked rank
        CONVEYOR_ASSERT(false) << "simulation stalled on a program Lower() accepts";
      }
    }
  }

  double step_end(int k) const { return step_end_[k]; }

 private:
  // Runs `a` on rank r at max(free, ready); advances `free`; records step 0.
  void RunOne(int r, int step, const Action& a, double ready, double& free, SimResult& result) {
    const double start = std::max(free, ready);
    const double end = start + Duration(a);
    progress_[step].MarkDone(a, end);
    free = end;
    if (step == 0) {
      result.busy[r] += end - start;
      result.timeline.spans.push_back(Span{r, a, start, end});
    }
  }

  // Whether `a`'s inputs are there; *ready is when they reach its rank.
  bool ReadyAt(int step, const Action& a, double* ready) const {
    return progress_[step].ReadyAt(a, costs_.transfer_time(), ready);
  }

  double Duration(const Action& a) const {
    const StageCost& c = costs_.cost(a.stage);
    switch (a.op) {
      case Op::kForward:
        return c.f;
      case Op::kBackward:
        return c.full_backward();
      case Op::kBackwardInput:
        return c.i;
      case Op::kBackwardWeight:
        return c.w;
      case Op::kOverlapFB: {
        const StageCost& back = costs_.cost(a.overlap_stage);
        if (c.overlap >= 0) return c.overlap;
        return c.f + (a.overlap_op == Op::kBackwardInput ? back.i : back.full_backward());
      }
      default:
        return 0;
    }
  }

  const Program& program_;
  const Layout& layout_;
  const CostModel& costs_;
  const int steps_;
  std::vector<Progress> progress_;  // per step
  std::vector<double> step_end_;
};

}  // namespace

SimResult Simulate(const Program& program, const CostModel& costs, const SimOptions& options) {
  CONVEYOR_CHECK(costs.mem_w >= 0 && costs.mem_w <= costs.mem_b)
      << "activation memory freed by W (" << costs.mem_w
      << ") must be within [0, mem_b = " << costs.mem_b << "]";
  const int steps = std::max(1, options.steady_state_steps);
  SimResult result;
  Engine engine(program, costs, steps);
  engine.Run(result);

  const int p = program.layout.num_ranks();
  result.makespan = engine.step_end(0);
  double total_busy = 0;
  for (int r = 0; r < p; ++r) {
    result.idle.push_back(result.makespan - result.busy[r]);
    total_busy += result.busy[r];
  }
  result.bubble_fraction = result.makespan > 0 ? 1.0 - total_busy / (p * result.makespan) : 0;
  for (double peak : PeakActivations(program, costs.mem_b, costs.mem_w)) {
    result.peak_activations.push_back(costs.mem_b > 0 ? peak / costs.mem_b : 0);
  }
  for (int r = 0; r < p; ++r) {
    for (const Action& a : program.ranks[r]) {
      if (IsCompute(a.op)) result.p2p_messages += TransfersOf(program.layout, a).size();
    }
  }
  result.p2p_bytes = result.p2p_messages * costs.message_bytes;
  if (steps >= 2) {
    const int half = steps / 2;
    result.steady_state_period =
        (engine.step_end(steps - 1) - engine.step_end(half - 1)) / (steps - half);
  }
  return result;
}

}  // namespace conveyor
