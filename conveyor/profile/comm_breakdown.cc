#include "conveyor/profile/comm_breakdown.h"

#include <algorithm>

#include "conveyor/common/error.h"

namespace conveyor {
namespace {

// The slot of the message that `a` (a SEND_* or RECV_*) sends or receives.
int SlotOf(const Layout& layout, const Action& a) {
  const bool gradient = a.op == Op::kSendB || a.op == Op::kRecvB;
  int sender = a.stage;
  if (a.op == Op::kRecvF) sender = layout.prev_stage(a.stage);
  if (a.op == Op::kRecvB) sender = layout.next_stage(a.stage);
  CONVEYOR_ASSERT(sender >= 0 && a.microbatch >= 0 && a.microbatch < layout.num_microbatches())
      << "no message for " << a;
  return (a.microbatch * layout.num_stages() + sender) * 2 + gradient;
}

}  // namespace

CommBreakdown& CommBreakdown::operator+=(const CommBreakdown& o) {
  dependency_wait_s += o.dependency_wait_s;
  transfer_wait_s += o.transfer_wait_s;
  in_flight_s += o.in_flight_s;
  overlapped_s += o.overlapped_s;
  messages += o.messages;
  return *this;
}

double CommBreakdown::overlap_fraction() const {
  return in_flight_s > 0 ? overlapped_s / in_flight_s : 1.0;
}

int MessageSlots(const Layout& layout) {
  return layout.num_microbatches() * layout.num_stages() * 2;
}

std::vector<double> SendPostTimes(const Layout& layout, const Timeline& step) {
  std::vector<double> posted(MessageSlots(layout), 0.0);
  for (const Span& s : step.spans) {
    if (s.kind == SpanKind::kPost && (s.action.op == Op::kSendF || s.action.op == Op::kSendB)) {
      posted[SlotOf(layout, s.action)] = s.end;
    }
  }
  return posted;
}

CommBreakdown BreakDownComm(const Layout& layout, const Timeline& step, int rank,
                            const std::vector<double>& posted) {
  CONVEYOR_ASSERT(static_cast<int>(posted.size()) == MessageSlots(layout))
      << "posting times for " << posted.size() << " messages, the layout has "
      << MessageSlots(layout);
  CommBreakdown out;
  for (const Span& s : step.spans) {
    if (s.rank != rank || s.kind != SpanKind::kWait) continue;
    if (s.action.op == Op::kSendF || s.action.op == Op::kSendB) {
      out.transfer_wait_s += s.end - s.start;
      continue;
    }
    const double p = posted[SlotOf(layout, s.action)];
    out.dependency_wait_s += std::clamp(p - s.start, 0.0, s.end - s.start);
    const double transfer = s.end - std::max(s.start, p);
    out.transfer_wait_s += std::max(0.0, transfer);
    const double in_flight = std::max(0.0, s.end - p);
    out.in_flight_s += in_flight;
    out.overlapped_s += in_flight - std::clamp(transfer, 0.0, in_flight);
    ++out.messages;
  }
  return out;
}

}  // namespace conveyor
