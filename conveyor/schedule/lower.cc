#include "conveyor/schedule/lower.h"

#include <map>
#include <sstream>
#include <vector>

namespace conveyor {
namespace {

void CheckValid(const Layout& layout, int rank, const Action& a) {
  auto check_one = [&](int stage, int mb) {
    CONVEYOR_CHECK(layout.valid_stage(stage) && layout.runs(stage, mb))
        << "rank " << rank << ": action " << a << " names stage " << stage << " / micro-batch "
        << mb << ", outside " << layout.Describe();
    CONVEYOR_CHECK(layout.rank_of(stage) == rank)
        << "rank " << rank << ": action " << a << " belongs to stage " << stage
        << ", which is placed on rank " << layout.rank_of(stage);
  };
  check_one(a.stage, a.microbatch);
  if (a.op == Op::kOverlapFB) check_one(a.overlap_stage, a.overlap_microbatch);
}

std::string DescribeDeadlock(const Program& in, const std::vector<size_t>& pos,
                             const Progress& progress) {
  std::ostringstream out;
  out << "deadlock: no rank can make progress (" << in.layout.Describe() << ")";
  for (int r = 0; r < in.layout.num_ranks(); ++r) {
    out << "\n  rank " << r << ": ";
    if (pos[r] == in.ranks[r].size()) {
      out << "finished";
      continue;
    }
    const Action& a = in.ranks[r][pos[r]];
    Action missing;
    progress.Ready(a, &missing);
    out << "blocked at action #" << pos[r] << " " << a << ", waiting for " << missing << " (rank "
        << in.layout.rank_of(missing.stage) << ")";
  }
  return out.str();
}

}  // namespace

Program Lower(const Program& program) {
  const Program in = program.ComputeOnly();
  const Layout& layout = in.layout;
  const int p = layout.num_ranks();
  for (int r = 0; r < p; ++r) {
    for (const Action& a : in.ranks[r]) {
      CONVEYOR_CHECK(a.op != Op::kReduceGrad || layout.valid_stage(a.stage))
          << "rank " << r << ": " << a << " names an unknown stage";
      if (a.op != Op::kReduceGrad) CheckValid(layout, r, a);
    }
  }

  Program out(layout);
  Progress progress(layout);
  std::vector<size_t> pos(p, 0);
  size_t remaining = in.size();
  while (remaining > 0) {
    bool progressed = false;
    for (int r = 0; r < p; ++r) {
      if (pos[r] == in.ranks[r].size()) continue;
      const Action& a = in.ranks[r][pos[r]];
      if (a.op != Op::kReduceGrad) {
        if (!progress.Ready(a)) continue;
        progress.MarkDone(a);
      }
      out.ranks[r].push_back(a);
      for (const Transfer& t : TransfersOf(layout, a)) {
        out.ranks[r].push_back(Action{t.send_op, t.from_stage, t.microbatch});
        out.ranks[layout.rank_of(t.to_stage)].push_back(
            Action{t.recv_op, t.to_stage, t.microbatch});
      }
      ++pos[r];
      --remaining;
      progressed = true;
    }
    if (!progressed) throw DeadlockError(DescribeDeadlock(in, pos, progress));
  }
  return out;
}

std::vector<int> GradientsFinalAfter(const std::vector<Action>& actions) {
  // The stage whose weight gradients an action adds to, or -1.
  auto weight_grad_stage = [](const Action& a) {
    const Action& b = a.op == Op::kOverlapFB ? a.BackwardHalf() : a;
    return b.op == Op::kBackward || b.op == Op::kBackwardWeight ? b.stage : -1;
  };
  std::map<int, size_t> last;  // stage -> index of its last weight-gradient action
  for (size_t k = 0; k < actions.size(); ++k) {
    const int stage = weight_grad_stage(actions[k]);
    if (stage >= 0) last[stage] = k;
  }
  std::vector<int> out(actions.size(), -1);
  for (const auto& [stage, k] : last) out[k] = stage;
  return out;
}

Program WithGradReductions(const Program& program) {
  Program out(program.layout);
  for (size_t r = 0; r < program.ranks.size(); ++r) {
    std::vector<Action> actions;
    for (const Action& a : program.ranks[r]) {
      if (a.op != Op::kReduceGrad) actions.push_back(a);
    }
    const std::vector<int> final_after = GradientsFinalAfter(actions);
    std::vector<int> pending;  // stages whose last weight-gradient action just ran
    for (size_t k = 0; k < actions.size(); ++k) {
      const bool send = actions[k].op == Op::kSendF || actions[k].op == Op::kSendB;
      if (!send) {  // after the sends that follow the action: they are not delayed
        for (int stage : pending) out.ranks[r].push_back(Action{Op::kReduceGrad, stage});
        pending.clear();
      }
      out.ranks[r].push_back(actions[k]);
      if (final_after[k] >= 0) pending.push_back(final_after[k]);
    }
    for (int stage : pending) out.ranks[r].push_back(Action{Op::kReduceGrad, stage});
  }
  return out;
}

}  // namespace conveyor
