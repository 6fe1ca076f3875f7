// HeartbeatMonitor: decides which rank has stalled, from the heartbeats the ranks publish.
//
// Every rank's process publishes a heartbeat (any value that changes every beat) from a
// thread of its own, which keeps beating through long computations but stops with the
// whole process when it is stopped (SIGSTOP), frozen or starved. One observer reads all the
// heartbeats now and then and feeds them here; a rank whose heartbeat has not changed for
// `stall_after`, by the observer's clock, is stalled. A rank that publishes kExited has left
// normally and is never stalled. Comparing values, not timestamps, keeps the ranks' clocks
// out of it.
//
// Thread-safety: none; one observer thread owns it.
#ifndef CONVEYOR_COMM_HEARTBEAT_MONITOR_H_
#define CONVEYOR_COMM_HEARTBEAT_MONITOR_H_

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace conveyor {

class HeartbeatMonitor {
 public:
  using Clock = std::chrono::steady_clock;

  // The heartbeat of a rank that has finished and stopped beating on purpose.
  static constexpr char kExited[] = "exited";

  struct Stall {
    int rank = 0;
    std::chrono::milliseconds silent{0};  // since its heartbeat last changed
  };

  // Every rank counts as having beaten at `start`. Preconditions: world_size >= 1,
  // stall_after > 0.
  HeartbeatMonitor(int world_size, std::chrono::milliseconds stall_after, Clock::time_point start);

  // Records `rank`'s heartbeat as read at `now`.
  void Observe(int rank, const std::string& heartbeat, Clock::time_point now);

  // The lowest rank silent for at least stall_after at `now`, if any.
  std::optional<Stall> FindStall(Clock::time_point now) const;

 private:
  struct Rank {
    std::string heartbeat;
    Clock::time_point changed;
    bool exited = false;
  };
  std::chrono::milliseconds stall_after_;
  std::vector<Rank> ranks_;
};

// The failure published for a stalled rank: "rank 2 stalled: no heartbeat for 20 s (...)",
// `silent` saying how long.
std::string StallFailure(int rank, const std::string& silent);

// Whether an error message carries the stall failure of `rank`: that rank, once it runs
// again, is the one its peers blame (and exits kExitBlamed, not as stopped for a peer).
bool BlamesStallOf(const std::string& message, int rank);

}  // namespace conveyor

#endif  // CONVEYOR_COMM_HEARTBEAT_MONITOR_H_
