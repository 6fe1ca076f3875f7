#include "conveyor/comm/heartbeat_monitor.h"

#include <cctype>

#include "conveyor/common/error.h"

namespace conveyor {

HeartbeatMonitor::HeartbeatMonitor(int world_size, std::chrono::milliseconds stall_after,
                                   Clock::time_point start)
    : stall_after_(stall_after) {
  CONVEYOR_ASSERT(world_size >= 1 && stall_after.count() > 0)
      << "world_size " << world_size << ", stall_after " << stall_after.count() << " ms";
  ranks_.resize(world_size, Rank{"", start, false});
}

void HeartbeatMonitor::Observe(int rank, const std::string& heartbeat, Clock::time_point now) {
  CONVEYOR_ASSERT(rank >= 0 && rank < static_cast<int>(ranks_.size())) << "rank " << rank;
  Rank& r = ranks_[rank];
  if (heartbeat == kExited) r.exited = true;
  if (heartbeat == r.heartbeat) return;
  r.heartbeat = heartbeat;
  r.changed = now;
}

std::optional<HeartbeatMonitor::Stall> HeartbeatMonitor::FindStall(Clock::time_point now) const {
  for (size_t rank = 0; rank < ranks_.size(); ++rank) {
    const Rank& r = ranks_[rank];
    const auto silent = std::chrono::duration_cast<std::chrono::milliseconds>(now - r.changed);
    if (!r.exited && silent >= stall_after_) return Stall{static_cast<int>(rank), silent};
  }
  return std::nullopt;
}

namespace {
std::string StallPrefix(int rank) { return "rank " + std::to_string(rank) + " stalled: "; }
}  // namespace

std::string StallFailure(int rank, const std::string& silent) {
  return StallPrefix(rank) + "no heartbeat for " + silent +
         " (stopped by a signal such as SIGSTOP, frozen, starved of CPU, or cut off by the "
         "network)";
}

bool BlamesStallOf(const std::string& message, int rank) {
  const std::string prefix = StallPrefix(rank);
  for (size_t at = message.find(prefix); at != std::string::npos;
       at = message.find(prefix, at + 1)) {
    // "rank 2 stalled" is not "rank 12 stalled".
    if (at == 0 || !std::isdigit(static_cast<unsigned char>(message[at - 1]))) return true;
  }
  return false;
}

}  // namespace conveyor
