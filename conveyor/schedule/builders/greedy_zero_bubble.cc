#include "conveyor/schedule/builders/greedy_zero_bubble.h"

#include <deque>

#include "conveyor/common/error.h"

namespace conveyor {
namespace {

class Greedy {
 public:
  Greedy(const Layout& layout, int cap)
      : layout_(layout),
        cap_(cap),
        progress_(layout),
        next_f_(layout.num_stages()),
        next_i_(layout.num_stages()),
        rank_(layout.num_ranks()) {
    for (int s = 0; s < layout.num_stages(); ++s) {
      next_f_[s] = next_i_[s] = layout.first_microbatch(s);
      remaining_ += 3 * (layout.end_microbatch(s) - layout.first_microbatch(s));
    }
  }

  Program Run() {
    Program program(layout_);
    for (int t = 0; remaining_ > 0; ++t) {
      bool started = false, capped = false;
      for (int r = 0; r < layout_.num_ranks(); ++r) {
        Action a;
        if (Pick(r, t, &a, &capped)) {
          program.ranks[r].push_back(a);
          started = true;
        }
      }
      if (!started && !Busy(t)) {
        CONVEYOR_ASSERT(capped) << "greedy scheduler stuck without a memory cap to relax";
        ++cap_;
      }
    }
    return program;
  }

 private:
  struct RankState {
    int free_at = 0;
    int in_flight = 0;
    std::deque<Action> weights;  // deferred W, oldest first
  };

  bool Busy(int t) const {
    for (const RankState& r : rank_) {
      if (r.free_at > t) return true;
    }
    return false;
  }

  // Whether the next pass of `op` on stage s has its inputs by time t.
  bool Ready(Op op, int s, int t) const {
    const int i = op == Op::kForward ? next_f_[s] : next_i_[s];
    if (i >= layout_.end_microbatch(s)) return false;
    double ready_at;
    return progress_.ReadyAt(Action{op, s, i}, /*transfer_time=*/0, &ready_at) && ready_at <= t;
  }

  // Starts one pass on rank r at time t, if any; sets *capped when an F waited for memory.
  bool Pick(int r, int t, Action* picked, bool* capped) {
    RankState& state = rank_[r];
    if (state.free_at > t) return false;
    const std::vector<int>& stages = layout_.stages_of(r);
    for (auto it = stages.rbegin(); it != stages.rend(); ++it) {
      if (!Ready(Op::kBackwardInput, *it, t)) continue;
      const int s = *it, i = next_i_[s]++;
      state.weights.push_back(Action{Op::kBackwardWeight, s, i});
      return Start(state, Action{Op::kBackwardInput, s, i}, t, picked);
    }
    for (auto it = stages.rbegin(); it != stages.rend(); ++it) {
      if (!Ready(Op::kForward, *it, t)) continue;
      if (state.in_flight >= cap_) {
        *capped = true;
        break;
      }
      const int s = *it, i = next_f_[s]++;
      ++state.in_flight;
      return Start(state, Action{Op::kForward, s, i}, t, picked);
    }
    if (state.weights.empty()) return false;
    const Action w = state.weights.front();
    state.weights.pop_front();
    --state.in_flight;
    return Start(state, w, t, picked);
  }

  // Runs `a` in slot t; it finishes at t + 1.
  bool Start(RankState& state, const Action& a, int t, Action* picked) {
    progress_.MarkDone(a, t + 1);
    state.free_at = t + 1;
    --remaining_;
    *picked = a;
    return true;
  }

  const Layout& layout_;
  int cap_;
  Progress progress_;                 // finish time of each pass
  std::vector<int> next_f_, next_i_;  // next micro-batch of each stage
  std::vector<RankState> rank_;
  long remaining_ = 0;
};

}  // namespace

Program GreedyZeroBubble(const Layout& layout, int max_in_flight) {
  CONVEYOR_ASSERT(max_in_flight >= 1) << "memory cap " << max_in_flight;
  return Greedy(layout, max_in_flight).Run();
}

}  // namespace conveyor
