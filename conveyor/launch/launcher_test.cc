#include "conveyor/launch/launcher.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "conveyor/common/remove_tree.h"

namespace conveyor {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::vector<std::string> Shell(const std::string& script) { return {"/bin/sh", "-c", script}; }

// A bound on every launch here, so a launcher that failed to stop ranks fails the test
// (deadline_exceeded) rather than hanging it.
LaunchOptions Bounded(std::ostringstream& out) {
  LaunchOptions options;
  options.out = &out;
  options.deadline = std::chrono::seconds(30);
  options.grace = std::chrono::seconds(2);
  return options;
}

TEST(LauncherTest, RanksSeeTheirEnvironmentAndOutputIsPrefixed) {
  std::ostringstream out;
  LaunchResult result = LaunchLocal(
      3, Shell("echo rank=$RANK of $WORLD_SIZE local=$LOCAL_RANK at $MASTER_ADDR:$MASTER_PORT"),
      Bounded(out));
  EXPECT_TRUE(result.ok()) << result.Report();
  EXPECT_EQ(result.ExitCode(), 0);
  ASSERT_EQ(result.ranks.size(), 3u);
  EXPECT_THAT(out.str(), HasSubstr("[rank 0] rank=0 of 3 local=0 at 127.0.0.1:"));
  EXPECT_THAT(out.str(), HasSubstr("[rank 2] rank=2 of 3 local=2 at 127.0.0.1:"));
}

// A rank knows LaunchLocal started it (and so that its command was checked); this process,
// started otherwise, does not.
TEST(LauncherTest, RanksKnowConveyorLaunchedThem) {
  EXPECT_FALSE(LaunchedByConveyor());
  std::ostringstream out;
  LaunchResult result =
      LaunchLocal(2, Shell(std::string("test -n \"$") + kReportFdVariable + "\" && echo launched"),
                  Bounded(out));
  EXPECT_TRUE(result.ok()) << result.Report();
  EXPECT_THAT(out.str(), HasSubstr("[rank 1] launched"));
}

// Rank 0's stdout and stderr stay apart (a JSON result on stdout, status lines on stderr).
TEST(LauncherTest, Rank0OnlyPrintsRank0) {
  std::ostringstream out, err;
  LaunchOptions options = Bounded(out);
  options.err = &err;
  options.output = LaunchOptions::Output::kRank0Only;
  LaunchResult result =
      LaunchLocal(2, Shell("echo hello from $RANK; echo status of $RANK >&2"), options);
  EXPECT_TRUE(result.ok()) << result.Report();
  EXPECT_EQ(out.str(), "hello from 0\n");
  EXPECT_EQ(err.str(), "status of 0\n");
}

TEST(LauncherTest, FailingRankStopsTheOthersAndIsReported) {
  std::ostringstream out;
  LaunchResult result = LaunchLocal(
      3, Shell("if [ \"$RANK\" = 1 ]; then echo oops >&2; exit 3; fi; sleep 60"), Bounded(out));
  EXPECT_FALSE(result.ok());
  EXPECT_FALSE(result.deadline_exceeded) << "the sleeping ranks were not stopped";
  EXPECT_EQ(result.failed_rank, 1);
  EXPECT_EQ(result.ExitCode(), 3);
  EXPECT_EQ(result.Report(),
            "rank 1's last stderr lines:\n  oops\n"
            "rank 1 exited with exit code 3; ranks 0 and 2 stopped");
  for (int r : {0, 2}) {
    EXPECT_TRUE(result.ranks[r].stopped_by_launcher);
    EXPECT_EQ(result.ranks[r].signal, SIGTERM);
  }
}

TEST(LauncherTest, ReportedErrorIsPrintedOnceThenASummary) {
  std::ostringstream out;
  LaunchOptions options = Bounded(out);
  options.output = LaunchOptions::Output::kRank0Only;
  LaunchResult result =
      LaunchLocal(3,
                  Shell("if [ \"$RANK\" = 1 ]; then echo 'rank 1: loss is NaN' > /proc/self/fd/$" +
                        std::string(kReportFdVariable) + "; exit 1; fi; sleep 60"),
                  options);
  EXPECT_EQ(result.failed_rank, 1);
  EXPECT_EQ(result.Report(),
            "rank 1: loss is NaN\nrank 1 exited with exit code 1; ranks 0 and 2 stopped");
  EXPECT_THAT(out.str(), Not(HasSubstr("NaN")));
}

TEST(LauncherTest, RankThatDoesNotStopWithItsPeersIsBlamed) {
  // Ranks 0 and 2 stop for a failure (exit code kExitPeerFailed) and say why; rank 1 is
  // frozen by SIGSTOP, as a stalled rank is. They stop only once rank 1 is frozen (its
  // state in /proc is T), whatever the machine's load: a handshake, not a sleep.
  std::string dir = testing::TempDir() + "/launcher-stalled-XXXXXX";
  ASSERT_NE(mkdtemp(dir.data()), nullptr);
  std::ostringstream out;
  const std::string script =
      "if [ \"$RANK\" = 1 ]; then echo $$ > " + dir + "/1.pid; kill -STOP $$; sleep 60; fi; " +
      "until [ -s " + dir + "/1.pid ] && [ \"$(cut -d' ' -f3 /proc/$(cat " + dir +
      "/1.pid)/stat)\" = T ]; do sleep 0.05; done; "
      "echo \"rank $RANK: recv aborted: rank 1 stalled\" > /proc/self/fd/$" +
      std::string(kReportFdVariable) + "; exit " + std::to_string(kExitPeerFailed);
  LaunchResult result = LaunchLocal(3, Shell(script), Bounded(out));
  EXPECT_FALSE(result.deadline_exceeded) << "the stalled rank was not stopped";
  EXPECT_EQ(result.failed_rank, 1) << result.Report();
  ASSERT_EQ(result.ranks.size(), 3u);
  EXPECT_TRUE(result.ranks[1].hung);
  EXPECT_EQ(result.ranks[1].stop_signal, SIGSTOP);
  EXPECT_EQ(result.ExitCode(), 1);
  EXPECT_THAT(result.Report(), HasSubstr(": recv aborted: rank 1 stalled\n"));
  EXPECT_THAT(result.Report(),
              HasSubstr("rank 1 did not stop when the others did (it was stopped by signal " +
                        std::to_string(SIGSTOP)));
  EXPECT_THAT(result.Report(), HasSubstr("; ranks 0 and 2 stopped"));
  RemoveTree(dir);
}

TEST(LauncherTest, RankKilledBySignalIsReported) {
  std::ostringstream out;
  LaunchResult result =
      LaunchLocal(2, Shell("if [ \"$RANK\" = 0 ]; then kill -9 $$; fi; sleep 60"), Bounded(out));
  EXPECT_EQ(result.failed_rank, 0);
  EXPECT_FALSE(result.ranks[0].exited);
  EXPECT_EQ(result.ranks[0].signal, SIGKILL);
  EXPECT_EQ(result.ExitCode(), 128 + SIGKILL);
  EXPECT_THAT(result.Report(), HasSubstr("rank 0 died of signal 9"));
}

TEST(LauncherTest, DeadlineStopsAHungRun) {
  std::ostringstream out;
  LaunchOptions options = Bounded(out);
  // Long enough for the shells to ignore SIGTERM before it comes, even on a busy machine
  // (with 300 ms a shell not yet past its `trap` once died of the SIGTERM).
  options.deadline = std::chrono::seconds(3);
  options.grace = std::chrono::milliseconds(200);
  LaunchResult result = LaunchLocal(2, Shell("trap '' TERM; sleep 60"), options);
  EXPECT_TRUE(result.deadline_exceeded);
  EXPECT_EQ(result.failed_rank, -1);
  EXPECT_EQ(result.ExitCode(), 124);
  for (const RankOutcome& r : result.ranks) EXPECT_EQ(r.signal, SIGKILL) << r.Describe();
}

TEST(LauncherTest, MissingProgramFailsWith127) {
  std::ostringstream out;
  LaunchResult result = LaunchLocal(1, {"/nonexistent/conveyor-child"}, Bounded(out));
  EXPECT_EQ(result.ExitCode(), 127);
  EXPECT_THAT(result.Report(), HasSubstr("cannot execute"));
  EXPECT_THAT(result.Report(), Not(HasSubstr("deadline")));
}

// Whether `pid` is a live process (a zombie is not).
bool Alive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const size_t paren = text.rfind(')');
  return paren != std::string::npos && paren + 2 < text.size() && text[paren + 2] != 'Z';
}

// Polls `done` every 20 ms for up to 30 s.
template <typename F>
bool Eventually(F done) {
  for (auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
       std::chrono::steady_clock::now() < end;) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return done();
}

// Runs a launcher of `nproc` sleeping ranks in a child process, as `conveyor` runs one;
// each rank writes its pid to DIR/RANK.pid. Returns the launcher's pid.
pid_t StartLauncher(const std::string& dir, int nproc) {
  pid_t pid = fork();
  if (pid != 0) return pid;
  signal(SIGINT, SIG_DFL);  // as from a terminal, even if this test runs in the background
  std::ostringstream out;
  LaunchOptions options = Bounded(out);
  int code = 99;
  try {
    code = LaunchLocal(nproc, Shell("echo $$ > " + dir + "/$RANK.pid; exec sleep 60"), options)
               .ExitCode();
  } catch (...) {
  }
  _exit(code);
}

TEST(LauncherTest, NoRankOutlivesAnInterruptedOrKilledLauncher) {
  constexpr int kRanks = 2;
  for (int signal : {SIGINT, SIGTERM, SIGKILL}) {
    SCOPED_TRACE(strsignal(signal));
    std::string dir = testing::TempDir() + "/launcher-signal-XXXXXX";
    ASSERT_NE(mkdtemp(dir.data()), nullptr);
    const pid_t launcher = StartLauncher(dir, kRanks);
    ASSERT_GT(launcher, 0);
    std::vector<pid_t> ranks(kRanks, 0);
    ASSERT_TRUE(Eventually([&] {
      for (int r = 0; r < kRanks; ++r) {
        std::ifstream file(dir + "/" + std::to_string(r) + ".pid");
        if (!(file >> ranks[r])) return false;
      }
      return true;
    })) << "the ranks never started";
    ASSERT_EQ(kill(launcher, signal), 0);
    int status = 0;
    ASSERT_EQ(waitpid(launcher, &status, 0), launcher);
    if (signal == SIGKILL) {
      EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    } else {
      ASSERT_TRUE(WIFEXITED(status));
      EXPECT_EQ(WEXITSTATUS(status), 128 + signal);
    }
    for (int r = 0; r < kRanks; ++r) {
      EXPECT_TRUE(Eventually([&] { return !Alive(ranks[r]); })) << "rank " << r << " survived";
      std::remove((dir + "/" + std::to_string(r) + ".pid").c_str());
    }
    rmdir(dir.c_str());
  }
}

}  // namespace
}  // namespace conveyor
