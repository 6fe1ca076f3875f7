#include "conveyor/comm/launcher.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <sstream>

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

TEST(LauncherTest, Rank0OnlyPrintsRank0) {
  std::ostringstream out;
  LaunchOptions options = Bounded(out);
  options.output = LaunchOptions::Output::kRank0Only;
  LaunchResult result = LaunchLocal(2, Shell("echo hello from $RANK"), options);
  EXPECT_TRUE(result.ok()) << result.Report();
  EXPECT_EQ(out.str(), "hello from 0\n");
}

TEST(LauncherTest, FailingRankStopsTheOthersAndIsReported) {
  std::ostringstream out;
  LaunchResult result = LaunchLocal(
      3, Shell("if [ \"$RANK\" = 1 ]; then echo oops >&2; exit 3; fi; sleep 60"), Bounded(out));
  EXPECT_FALSE(result.ok());
  EXPECT_FALSE(result.deadline_exceeded) << "the sleeping ranks were not stopped";
  EXPECT_EQ(result.failed_rank, 1);
  EXPECT_EQ(result.ExitCode(), 3);
  EXPECT_THAT(result.Report(), HasSubstr("rank 1 failed: rank 1 exited with exit code 3"));
  EXPECT_THAT(result.Report(), HasSubstr("oops"));
  for (int r : {0, 2}) {
    EXPECT_TRUE(result.ranks[r].stopped_by_launcher);
    EXPECT_EQ(result.ranks[r].signal, SIGTERM);
  }
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
  options.deadline = std::chrono::milliseconds(300);
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

}  // namespace
}  // namespace conveyor
