#include "conveyor/schedule/program.h"

#include <algorithm>

#include "conveyor/common/error.h"

namespace conveyor {

bool Program::has_comms() const {
  for (const auto& actions : ranks) {
    for (const Action& a : actions) {
      if (IsComm(a.op)) return true;
    }
  }
  return false;
}

Program Program::ComputeOnly() const {
  Program out(layout);
  for (size_t r = 0; r < ranks.size(); ++r) {
    for (const Action& a : ranks[r]) {
      if (!IsComm(a.op)) out.ranks[r].push_back(a);
    }
  }
  return out;
}

size_t Program::size() const {
  size_t total = 0;
  for (const auto& actions : ranks) total += actions.size();
  return total;
}

std::string Program::ToText() const {
  std::string text;
  for (size_t r = 0; r < ranks.size(); ++r) {
    text += "rank " + std::to_string(r) + ":";
    for (const Action& a : ranks[r]) text += " " + a.ToString();
    text += "\n";
  }
  return text;
}

Progress::Progress(const Layout& layout)
    : layout_(&layout),
      m_(layout.num_microbatches()),
      finish_(static_cast<size_t>(layout.num_stages()) * layout.num_microbatches() * 2, kNotDone) {}

bool Progress::ReadySimple(const Action& a, double transfer_time, double* ready_at,
                           Action* missing) const {
  const int s = a.stage, i = a.microbatch;
  // Whether result `result` of (stage, i) is done; if so, folds its arrival into *ready_at.
  auto need = [&](int stage, Result result) {
    const double done = finish_[index(stage, i, result)];
    if (done == kNotDone) {
      if (missing != nullptr) {
        *missing = Action{result == kF ? Op::kForward : Op::kBackwardInput, stage, i};
      }
      return false;
    }
    const bool remote = layout_->rank_of(stage) != layout_->rank_of(s);
    *ready_at = std::max(*ready_at, done + (remote ? transfer_time : 0.0));
    return true;
  };
  switch (a.op) {
    case Op::kForward: {
      const int prev = layout_->prev_stage(s);
      return prev < 0 || need(prev, kF);
    }
    case Op::kBackward:
    case Op::kBackwardInput: {
      if (!need(s, kF)) return false;
      const int next = layout_->next_stage(s);
      return next < 0 || need(next, kI);
    }
    case Op::kBackwardWeight:
      return need(s, kI);
    default:
      CONVEYOR_ASSERT(false) << "not a simple compute action: " << a;
      return false;
  }
}

bool Progress::ReadyAll(const Action& a, double transfer_time, double* ready_at,
                        Action* missing) const {
  if (a.op != Op::kOverlapFB) return ReadySimple(a, transfer_time, ready_at, missing);
  return ReadySimple(a.ForwardHalf(), transfer_time, ready_at, missing) &&
         ReadySimple(a.BackwardHalf(), transfer_time, ready_at, missing);
}

bool Progress::Ready(const Action& a, Action* missing) const {
  double ready_at = 0;
  return ReadyAll(a, 0, &ready_at, missing);
}

bool Progress::ReadyAt(const Action& a, double transfer_time, double* ready_at) const {
  *ready_at = 0;
  return ReadyAll(a, transfer_time, ready_at, nullptr);
}

void Progress::MarkSimple(const Action& a, double at) {
  const int s = a.stage, i = a.microbatch;
  switch (a.op) {
    case Op::kForward:
      finish_[index(s, i, kF)] = at;
      break;
    case Op::kBackward:
    case Op::kBackwardInput:
      finish_[index(s, i, kI)] = at;
      break;
    case Op::kBackwardWeight:
      break;  // no action consumes W
    default:
      CONVEYOR_ASSERT(false) << "not a simple compute action: " << a;
  }
}

void Progress::MarkDone(const Action& a, double at) {
  CONVEYOR_ASSERT(at >= 0) << "finish time " << at << " of " << a;
  if (a.op != Op::kOverlapFB) return MarkSimple(a, at);
  MarkSimple(a.ForwardHalf(), at);
  MarkSimple(a.BackwardHalf(), at);
}

std::vector<Transfer> TransfersOf(const Layout& layout, const Action& action) {
  std::vector<Transfer> out;
  auto add = [&](const Action& a) {
    if (a.op == Op::kForward) {
      const int next = layout.next_stage(a.stage);
      if (next >= 0 && layout.rank_of(next) != layout.rank_of(a.stage)) {
        out.push_back({Op::kSendF, a.stage, Op::kRecvF, next, a.microbatch});
      }
    } else if (IsBackwardish(a.op)) {
      const int prev = layout.prev_stage(a.stage);
      if (prev >= 0 && layout.rank_of(prev) != layout.rank_of(a.stage)) {
        out.push_back({Op::kSendB, a.stage, Op::kRecvB, prev, a.microbatch});
      }
    }
  };
  if (action.op == Op::kOverlapFB) {
    add(action.ForwardHalf());
    add(action.BackwardHalf());
  } else {
    add(action);
  }
  return out;
}

}  // namespace conveyor
