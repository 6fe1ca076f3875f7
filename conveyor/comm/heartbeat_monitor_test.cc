// Unit tests of the monitor, then the whole mechanism over real processes: a rank stopped by
// SIGSTOP is named, and the others stop within the stall bound instead of the op timeout.
#include "conveyor/comm/heartbeat_monitor.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <iostream>
#include <thread>

#include "conveyor/comm/c10d_transport.h"
#include "conveyor/launch/launcher.h"
#include "conveyor/launch/worker_testing.h"

namespace conveyor {
namespace {

using std::chrono::seconds;
using Clock = HeartbeatMonitor::Clock;

TEST(HeartbeatMonitorTest, TheStallFailureNamesItsRankAndIsFoundInAMessage) {
  const std::string failure = StallFailure(2, "20 s");
  EXPECT_EQ(failure.rfind("rank 2 stalled: no heartbeat for 20 s (", 0), 0u) << failure;
  const std::string message = "rank 2: recv from rank 1 (tag 7) aborted: " + failure;
  EXPECT_TRUE(BlamesStallOf(message, 2));
  EXPECT_FALSE(BlamesStallOf(message, 1));
  EXPECT_FALSE(BlamesStallOf("rank 0: send aborted: " + StallFailure(12, "3 s"), 2));
  EXPECT_TRUE(BlamesStallOf(StallFailure(12, "3 s"), 12));
  EXPECT_FALSE(BlamesStallOf("rank 2 failed: loss is nan", 2));
}

TEST(HeartbeatMonitorTest, SilentRankIsStalledOthersAreNot) {
  const Clock::time_point t0{};
  HeartbeatMonitor monitor(3, seconds(20), t0);
  for (int s = 1; s <= 30; ++s) {
    for (int rank : {0, 2}) monitor.Observe(rank, std::to_string(s), t0 + seconds(s));
    monitor.Observe(1, s < 5 ? std::to_string(s) : "4", t0 + seconds(s));  // stops at 4 s
    if (s < 24) {
      EXPECT_FALSE(monitor.FindStall(t0 + seconds(s))) << "at " << s << " s";
    }
  }
  std::optional<HeartbeatMonitor::Stall> stall = monitor.FindStall(t0 + seconds(30));
  ASSERT_TRUE(stall.has_value());
  EXPECT_EQ(stall->rank, 1);
  EXPECT_EQ(stall->silent, seconds(26));
}

TEST(HeartbeatMonitorTest, ARankNeverSeenCountsFromTheStart) {
  const Clock::time_point t0{};
  HeartbeatMonitor monitor(2, seconds(10), t0);
  monitor.Observe(0, "1", t0 + seconds(9));
  EXPECT_FALSE(monitor.FindStall(t0 + seconds(9)));
  monitor.Observe(0, "2", t0 + seconds(10));
  std::optional<HeartbeatMonitor::Stall> stall = monitor.FindStall(t0 + seconds(10));
  ASSERT_TRUE(stall.has_value());
  EXPECT_EQ(stall->rank, 1);
}

TEST(HeartbeatMonitorTest, ExitedRankIsNeverStalled) {
  const Clock::time_point t0{};
  HeartbeatMonitor monitor(2, seconds(5), t0);
  monitor.Observe(1, HeartbeatMonitor::kExited, t0 + seconds(1));
  for (int s = 1; s <= 60; ++s) monitor.Observe(0, std::to_string(s), t0 + seconds(s));
  EXPECT_FALSE(monitor.FindStall(t0 + seconds(60)));
}

TEST(HeartbeatProcessTest, StoppedRankIsNamedAndTheOthersStop) {
  LaunchOptions options;
  options.deadline = std::chrono::seconds(120);
  options.grace = std::chrono::seconds(2);
  options.out = &std::cerr;
  WorkerRun run = LaunchWorker(3, "StoppedRank1", options);
  EXPECT_THAT(run.finished, ::testing::ElementsAre(0, 2));
  const LaunchResult& result = run.launch;
  EXPECT_FALSE(result.deadline_exceeded);
  EXPECT_EQ(result.failed_rank, 1) << result.Report();
  ASSERT_EQ(result.ranks.size(), 3u);
  EXPECT_TRUE(result.ranks[1].hung);
  EXPECT_EQ(result.ranks[1].stop_signal, SIGSTOP);
  for (int r : {0, 2}) {
    EXPECT_TRUE(result.ranks[r].exited && result.ranks[r].exit_code == kExitPeerFailed)
        << result.ranks[r].Describe();
  }
  EXPECT_THAT(result.Report(), ::testing::HasSubstr("rank 1 stalled: no heartbeat for"));
}

// Rank 1 stops itself; the others wait on it with a 60 s timeout, which must not be what
// ends their wait. They exit as ranks that stopped for a peer, saying why.
CONVEYOR_WORKER(StoppedRank1) {
  C10dOptions options;
  options.transport.timeout = std::chrono::seconds(60);
  options.failure_poll_interval = std::chrono::milliseconds(50);
  options.heartbeat_interval = std::chrono::milliseconds(100);
  // Well above the beat, so that on a busy machine only the stopped rank is found silent.
  options.stall_timeout = std::chrono::seconds(5);
  std::unique_ptr<Transport> t = ConnectC10d(RendezvousFromEnvironment(), options);
  if (t->rank() == 1) {
    raise(SIGSTOP);
    std::this_thread::sleep_for(std::chrono::seconds(60));
    _exit(1);
  }
  std::string error = "no error";
  try {
    t->Recv(at::zeros({1}), 1, 7)->Wait();
  } catch (const CommError& e) {
    error = e.what();
  }
  ReportToLauncher(error);
  t.reset();  // as a rank leaves: rank 0 keeps the store up a moment for the others
  const bool named = error.find("rank 1 stalled") != std::string::npos;
  if (named) MarkWorkerFinished();
  _exit(named ? kExitPeerFailed : 1);
}

}  // namespace
}  // namespace conveyor
