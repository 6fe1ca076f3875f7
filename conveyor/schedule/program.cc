#include "conveyor/schedule/program.h"

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
      flags_(static_cast<size_t>(layout.num_stages()) * layout.num_microbatches(), 0) {}

bool Progress::ReadySimple(const Action& a, Action* missing) const {
  const int s = a.stage, i = a.microbatch;
  auto need = [&](bool ok, Op op, int stage) {
    if (!ok && missing != nullptr) *missing = Action{op, stage, i};
    return ok;
  };
  switch (a.op) {
    case Op::kForward: {
      const int prev = layout_->prev_stage(s);
      return prev < 0 || need(forward_done(prev, i), Op::kForward, prev);
    }
    case Op::kBackward:
    case Op::kBackwardInput: {
      if (!need(forward_done(s, i), Op::kForward, s)) return false;
      const int next = layout_->next_stage(s);
      return next < 0 || need(input_grad_done(next, i), Op::kBackwardInput, next);
    }
    case Op::kBackwardWeight:
      return need(input_grad_done(s, i), Op::kBackwardInput, s);
    default:
      CONVEYOR_ASSERT(false) << "not a simple compute action: " << a;
      return false;
  }
}

bool Progress::Ready(const Action& a, Action* missing) const {
  if (a.op != Op::kOverlapFB) return ReadySimple(a, missing);
  return ReadySimple(a.ForwardHalf(), missing) && ReadySimple(a.BackwardHalf(), missing);
}

void Progress::MarkSimple(const Action& a) {
  unsigned char& f = flags_[a.stage * m_ + a.microbatch];
  switch (a.op) {
    case Op::kForward:
      f |= kF;
      break;
    case Op::kBackward:
      f |= kI | kW;
      break;
    case Op::kBackwardInput:
      f |= kI;
      break;
    case Op::kBackwardWeight:
      f |= kW;
      break;
    default:
      CONVEYOR_ASSERT(false) << "not a simple compute action: " << a;
  }
}

void Progress::MarkDone(const Action& a) {
  if (a.op != Op::kOverlapFB) return MarkSimple(a);
  MarkSimple(a.ForwardHalf());
  MarkSimple(a.BackwardHalf());
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
