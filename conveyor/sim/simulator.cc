#include "conveyor/sim/simulator.h"

#include <algorithm>
#include <deque>
#include <limits>
#include <string>

#include "conveyor/common/error.h"
#include "conveyor/schedule/activation_memory.h"
#include "conveyor/schedule/lower.h"
#include "conveyor/schedule/verify.h"

namespace conveyor {
namespace {

double ComputeCost(const CostModel& costs, const Action& a);

// What running `a` costs: its stage's time for its op (an OVERLAP_F_B unit: the overlap
// cost, or both halves), and handing each message it produces to the transport.
double Cost(const CostModel& costs, const Layout& layout, const Action& a) {
  const double posts = costs.post > 0 ? costs.post * TransfersOf(layout, a).size() : 0;
  return ComputeCost(costs, a) + posts;
}

double ComputeCost(const CostModel& costs, const Action& a) {
  const StageCost& c = costs.cost(a.stage);
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
      const StageCost& back = costs.cost(a.overlap_stage);
      if (c.overlap >= 0) return c.overlap;
      const double x = a.overlap_op == Op::kBackwardInput ? back.i : back.full_backward();
      if (!costs.pairs_at_once) return c.f + x;
      // Each half's waiting hidden under the other's compute, as far as that reaches.
      return std::max({c.f + x - c.comm_f - back.comm_b, c.f, x});
    }
    default:
      return 0;
  }
}

// Whether `a` runs as its two halves one after the other (an OVERLAP_F_B unit without an
// overlap cost, its pairs not at once: each half as soon as its own inputs are there).
bool RunsAsHalves(const CostModel& costs, const Action& a) {
  return a.op == Op::kOverlapFB && costs.cost(a.stage).overlap < 0 && !costs.pairs_at_once;
}

// Per rank, GradientsFinalAfter of its list.
std::vector<std::vector<int>> FinalGradients(const Program& program) {
  std::vector<std::vector<int>> out;
  for (const std::vector<Action>& actions : program.ranks) {
    out.push_back(GradientsFinalAfter(actions));
  }
  return out;
}

// The timeline's phase for stage `stage`'s gradient reduction on rank r.
Phase ReductionPhase(int r, int stage, double start, double end) {
  return Phase{r, "dp all-reduce stage " + std::to_string(stage), start, end,
               PhaseTrack::kDataParallel};
}

// `steps` back-to-back runs of one program, each with its own Progress holding finish
// times; every rank runs its list once per step, in order.
class Engine {
 public:
  Engine(const Program& program, const CostModel& costs, int steps)
      : program_(program),
        layout_(program.layout),
        costs_(costs),
        steps_(steps),
        progress_(steps, Progress(layout_)),
        final_after_(FinalGradients(program)) {}

  // Runs all steps. Fills the step-0 timeline and per-rank busy time, and each rank's
  // finish time of every step. Throws DeadlockError when the program cannot complete.
  void Run(SimResult& result) {
    const int p = layout_.num_ranks();
    std::vector<int> step(p, 0);
    std::vector<size_t> pos(p, 0);
    std::vector<double> free(p, 0.0);
    channel_.assign(p, 0.0);
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
          if (RunsAsHalves(costs_, a)) {
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
          const int reduced = final_after_[r][pos[r]];
          if (reduced >= 0) Reduce(r, step[r], reduced, free[r], result);
          if (++pos[r] == actions.size()) {
            free[r] = std::max(free[r], channel_[r]);  // the optimizer waits for reductions
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
    const double end = start + Cost(costs_, layout_, a);
    progress_[step].MarkDone(a, end);
    free = end;
    if (step == 0) {
      result.busy[r] += end - start;
      result.timeline.spans.push_back(Span{r, a, start, end});
    }
  }

  // Queues stage `stage`'s reduction on rank r's channel at `ready`; records step 0.
  void Reduce(int r, int step, int stage, double ready, SimResult& result) {
    const double t = costs_.reduce_time(stage);
    if (t <= 0) return;
    const double start = std::max(channel_[r], ready);
    channel_[r] = start + t;
    if (step == 0) result.timeline.phases.push_back(ReductionPhase(r, stage, start, channel_[r]));
  }

  // Whether `a`'s inputs are there; *ready is when they reach its rank.
  bool ReadyAt(int step, const Action& a, double* ready) const {
    return progress_[step].ReadyAt(a, costs_.transfer_time(), ready);
  }

  const Program& program_;
  const Layout& layout_;
  const CostModel& costs_;
  const int steps_;
  std::vector<Progress> progress_;  // per step
  const std::vector<std::vector<int>> final_after_;
  std::vector<double> channel_;  // per rank: when its reduction channel is free
  std::vector<double> step_end_;
};

// Engine's steps when ranks are placed on devices (CostModel::sharing): time moves from
// event to event (a rank's work finishing, inputs reaching a waiting rank); in between, each
// busy rank works at its device's rate for the number of ranks busy on it. With no device
// shared beyond its capacity it gives Engine's times (tested).
class SharedEngine {
 public:
  SharedEngine(const Program& program, const CostModel& costs, int steps)
      : program_(program),
        costs_(costs),
        steps_(steps),
        progress_(steps, Progress(program.layout)),
        final_after_(FinalGradients(program)) {}

  void Run(SimResult& result) {
    const int p = program_.layout.num_ranks();
    ranks_.assign(p, RankState{});
    step_end_.assign(steps_, 0.0);
    result.busy.assign(p, 0.0);
    result.timeline.num_ranks = p;
    for (int r = 0; r < p; ++r) Skip(r);
    double now = 0;
    for (;;) {
      bool all_done = true;
      for (int r = 0; r < p; ++r) {
        TryStart(r, now);
        if (!Done(r)) all_done = false;
      }
      if (all_done) break;
      // The next event: the first busy rank or reduction channel to finish, or inputs
      // reaching an idle rank.
      std::vector<int> busy_on(costs_.sharing.capacity.size(), 0);
      for (int r = 0; r < p; ++r) {
        busy_on[Device(r)] += ranks_[r].running + !ranks_[r].reductions.empty();
      }
      double next = kNever;
      std::vector<double> rate(p, 0.0);
      for (int r = 0; r < p; ++r) {
        const RankState& s = ranks_[r];
        rate[r] = costs_.sharing.Rate(Device(r), busy_on[Device(r)]);
        if (s.running) {
          next = std::min(next, now + s.remaining / rate[r]);
        } else if (s.inputs_at > now) {
          next = std::min(next, s.inputs_at);
        }
        if (!s.reductions.empty()) next = std::min(next, now + s.reduce_remaining / rate[r]);
      }
      if (next == kNever) {
        Lower(program_);  // throws DeadlockError naming every blocked rank
        CONVEYOR_ASSERT(false) << "simulation stalled on a program Lower() accepts";
      }
      const double slack = 1e-12 * std::max(1.0, next);
      for (int r = 0; r < p; ++r) {
        RankState& s = ranks_[r];
        if (s.reductions.empty()) continue;
        if (now + s.reduce_remaining / rate[r] <= next + slack) {
          FinishReduction(r, next, result);
        } else {
          s.reduce_remaining -= rate[r] * (next - now);
        }
      }
      for (int r = 0; r < p; ++r) {
        RankState& s = ranks_[r];
        if (!s.running) continue;
        const bool finishes = now + s.remaining / rate[r] <= next + slack;
        s.remaining = finishes ? 0 : s.remaining - rate[r] * (next - now);
        if (finishes) Finish(r, next, result);
      }
      now = next;
    }
  }

  double step_end(int k) const { return step_end_[k]; }

 private:
  static constexpr double kNever = std::numeric_limits<double>::infinity();

  struct RankState {
    int step = 0;
    size_t pos = 0;          // next action of the rank's list
    int half = 0;            // of an action run as halves: the next half
    bool running = false;    // working on `work`
    bool optimizer = false;  // `work` is the optimizer step after the list
    Action work;
    double remaining = 0;  // work left, at full speed
    double start = 0;
    double inputs_at = -1;  // waiting: when the next action's inputs arrive (-1: unknown)
    // Its reduction channel: the stages whose gradients await reduction, the first one being
    // reduced since reduce_start with reduce_remaining of work left.
    std::deque<int> reductions;
    double reduce_remaining = 0;
    double reduce_start = 0;
  };

  int Device(int r) const { return costs_.sharing.device[r]; }
  bool Done(int r) const { return ranks_[r].step == steps_ || program_.ranks[r].empty(); }

  // Moves rank r past the non-compute actions (SEND/RECV take no time in the simulation),
  // ending its step where the list ends.
  void Skip(int r) {
    RankState& s = ranks_[r];
    const auto& actions = program_.ranks[r];
    while (!Done(r) && !s.running && s.pos < actions.size() && !IsCompute(actions[s.pos].op)) {
      ++s.pos;
    }
  }

  // The action rank r runs next (one half of a unit run as halves).
  Action Next(int r) const {
    const RankState& s = ranks_[r];
    const Action& a = program_.ranks[r][s.pos];
    if (!RunsAsHalves(costs_, a)) return a;
    return s.half == 0 ? a.ForwardHalf() : a.BackwardHalf();
  }

  // Starts rank r's next action at `now` if its inputs are there by then.
  void TryStart(int r, double now) {
    RankState& s = ranks_[r];
    if (s.running || Done(r)) return;
    if (s.pos == program_.ranks[r].size()) {
      EndStep(r, now);  // then the next step's first action, where it went on to it
      if (s.running || Done(r) || s.pos == program_.ranks[r].size()) return;
    }
    const Action a = Next(r);
    double ready = 0;
    if (!progress_[s.step].ReadyAt(a, costs_.transfer_time(), &ready)) {
      s.inputs_at = -1;  // a producer has not finished: its finish is an event
      return;
    }
    if (ready > now) {
      s.inputs_at = ready;
      return;
    }
    s.running = true;
    s.optimizer = false;
    s.work = a;
    s.remaining = Cost(costs_, program_.layout, a);
    s.start = now;
    s.inputs_at = -1;
  }

  void Finish(int r, double now, SimResult& result) {
    RankState& s = ranks_[r];
    s.running = false;
    if (s.optimizer) {
      s.pos = 0;
      ++s.step;
      Skip(r);
      return;
    }
    progress_[s.step].MarkDone(s.work, now);
    if (s.step == 0) {
      result.busy[r] += now - s.start;
      result.timeline.spans.push_back(Span{r, s.work, s.start, now});
    }
    if (RunsAsHalves(costs_, program_.ranks[r][s.pos]) && s.half == 0) {
      s.half = 1;
    } else {
      s.half = 0;
      const int reduced = final_after_[r][s.pos];
      if (reduced >= 0 && costs_.reduce_time(reduced) > 0) {
        s.reductions.push_back(reduced);
        if (s.reductions.size() == 1) {
          s.reduce_remaining = costs_.reduce_time(reduced);
          s.reduce_start = now;
        }
      }
      ++s.pos;
      Skip(r);
    }
    if (s.pos == program_.ranks[r].size()) EndStep(r, now);
  }

  // Rank r's channel finished the reduction at its front; the next one starts.
  void FinishReduction(int r, double now, SimResult& result) {
    RankState& s = ranks_[r];
    if (s.step == 0) {
      result.timeline.phases.push_back(
          ReductionPhase(r, s.reductions.front(), s.reduce_start, now));
    }
    s.reductions.pop_front();
    if (s.reductions.empty()) return;
    s.reduce_remaining = costs_.reduce_time(s.reductions.front());
    s.reduce_start = now;
  }

  // Rank r finished its list of the step: once its reductions are done (else TryStart calls
  // again at a later event), its optimizer step (as work on its device), then the next step.
  void EndStep(int r, double now) {
    RankState& s = ranks_[r];
    if (!s.reductions.empty()) return;
    step_end_[s.step] = std::max(step_end_[s.step], now);
    if (costs_.optimizer > 0) {
      s.running = true;
      s.optimizer = true;
      s.remaining = costs_.optimizer;
      s.start = now;
      return;
    }
    s.pos = 0;
    ++s.step;
    Skip(r);
  }

  const Program& program_;
  const CostModel& costs_;
  const int steps_;
  std::vector<Progress> progress_;  // per step
  const std::vector<std::vector<int>> final_after_;
  std::vector<RankState> ranks_;
  std::vector<double> step_end_;
};

}  // namespace

SimResult Simulate(const Program& program, const CostModel& costs, const SimOptions& options) {
  CONVEYOR_CHECK(costs.mem_w >= 0 && costs.mem_w <= costs.mem_b)
      << "activation memory freed by W (" << costs.mem_w
      << ") must be within [0, mem_b = " << costs.mem_b << "]";
  const int steps = std::max(1, options.steady_state_steps);
  CheckSharing(costs.sharing, program.layout.num_ranks());
  SimResult result;
  double first_end = 0, half_end = 0, last_end = 0;
  const int half = steps / 2;
  auto run = [&](auto engine) {
    engine.Run(result);
    first_end = engine.step_end(0);
    if (steps >= 2) half_end = engine.step_end(half - 1), last_end = engine.step_end(steps - 1);
  };
  if (!costs.sharing.device.empty()) {
    run(SharedEngine(program, costs, steps));
  } else {
    run(Engine(program, costs, steps));
  }

  const int p = program.layout.num_ranks();
  result.reduced_end = first_end;
  for (const Span& span : result.timeline.spans) {
    result.makespan = std::max(result.makespan, span.end);
  }
  for (int r = 0; r < p; ++r) result.idle.push_back(result.makespan - result.busy[r]);
  for (const Span& span : result.timeline.spans)
    result.work += Cost(costs, program.layout, span.action);
  const double room = costs.sharing.Room(p);
  result.bubble_fraction = result.makespan > 0 ? 1.0 - result.work / (room * result.makespan) : 0;
  for (double peak : PeakActivations(program, costs.mem_b, costs.mem_w)) {
    result.peak_activations.push_back(costs.mem_b > 0 ? peak / costs.mem_b : 0);
  }
  for (int r = 0; r < p; ++r) {
    for (const Action& a : program.ranks[r]) {
      if (IsCompute(a.op)) result.p2p_messages += TransfersOf(program.layout, a).size();
    }
  }
  result.p2p_bytes = result.p2p_messages * costs.message_bytes;
  if (steps >= 2) result.steady_state_period = (last_end - half_end) / (steps - half);
  return result;
}

}  // namespace conveyor
