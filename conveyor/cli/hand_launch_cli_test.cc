// Ranks started by hand (as torchrun, srun or mpirun start them: RANK, WORLD_SIZE,
// MASTER_ADDR, MASTER_PORT), each resolving its own flags: ranks that disagree, a world size
// given two ways, two processes claiming one rank are all stopped before the first step,
// every process naming the cause (launch/rank_settings.h, comm/c10d_world.h).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "conveyor/cli/cli_testing.h"
#include "conveyor/launch/rendezvous.h"

namespace conveyor {
namespace {

struct Process {
  int rank;
  int world_size;
  std::string args;      // after `conveyor train`
  std::string cwd = "";  // where it starts ("": the test's own folder)
};

// Runs the processes at once on one free port, each bounded by 60 s, for `steps` steps;
// their results, in order.
std::vector<Result> Launch(const std::string& name, const std::vector<Process>& processes,
                           int steps = 20) {
  const std::string dir = ScratchDir(name);
  const int port = PickFreePort();
  std::string script;
  for (size_t i = 0; i < processes.size(); ++i) {
    const Process& p = processes[i];
    const std::string out = dir + "/" + std::to_string(i);
    script += "(" + (p.cwd.empty() ? "" : "cd " + p.cwd + " && ") +
              "RANK=" + std::to_string(p.rank) + " WORLD_SIZE=" + std::to_string(p.world_size) +
              " LOCAL_RANK=" + std::to_string(p.rank) +
              " MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port) + " timeout 60 " +
              CONVEYOR_BINARY + " train --steps " + std::to_string(steps) +
              " --sample-tokens 0 --eval-every 0 --timeout 20 " + p.args + " > " + out +
              ".out 2>&1; echo $? > " + out + ".code) & ";
    if (i == 0) script += "sleep 0.3; ";  // rank 0 first: it serves the store
  }
  Shell(script + "wait");
  std::vector<Result> results;
  for (size_t i = 0; i < processes.size(); ++i) {
    const std::string out = dir + "/" + std::to_string(i);
    Result r{-1, "", ""};
    std::ifstream(out + ".code") >> r.code;
    std::ostringstream text;
    text << std::ifstream(out + ".out").rdbuf();
    r.err = text.str();  // stdout and stderr together
    results.push_back(r);
  }
  return results;
}

void ExpectStoppedNaming(const std::vector<Result>& results, const std::string& words) {
  for (size_t i = 0; i < results.size(); ++i) {
    EXPECT_NE(results[i].code, 0) << "process " << i << ":\n" << results[i].err;
    EXPECT_NE(results[i].err.find(words), std::string::npos) << "process " << i << ":\n"
                                                             << results[i].err;
    EXPECT_EQ(results[i].err.find("step 1/"), std::string::npos) << "process " << i << " trained";
  }
}

TEST(HandLaunchTest, RanksWithDifferentSettingsStopBeforeTheFirstStepNamingThem) {
  ExpectStoppedNaming(
      Launch("settings", {{0, 2, "--pp 2"}, {1, 2, "--pp 2 --seed 99 --lr 0.05"}}),
      "the ranks were started with different settings, stopping before the first step: --seed "
      "is 1234 on rank 0 and 99 on rank 1; --lr is 0.003 on rank 0 and 0.05 on rank 1");
  ExpectStoppedNaming(Launch("schedule", {{0, 2, "--pp 2"}, {1, 2, "--pp 2 --schedule gpipe"}}),
                      "--schedule is 1f1b on rank 0 and gpipe on rank 1");
  ExpectStoppedNaming(Launch("hidden", {{0, 2, "--pp 2"}, {1, 2, "--pp 2 --hidden 32"}}),
                      "--hidden is 64 on rank 0 and 32 on rank 1");
}

// Two nodes holding other text under the same path: the ranks compare what they read.
TEST(HandLaunchTest, RanksThatReadOtherContentsUnderOnePathStopNamingIt) {
  const std::string a = ScratchWithCorpus("node_a"), b = ScratchWithCorpus("node_b");
  Shell("echo 'one more line only node b has' >> " + b + "/corpus.txt");
  ExpectStoppedNaming(Launch("contents", {{0, 2, "--pp 2 --data corpus.txt", a},
                                          {1, 2, "--pp 2 --data corpus.txt", b}}),
                      "--data (contents) is ");
  // The same contents in two places agree (and train).
  const std::string c = ScratchWithCorpus("node_c");
  const std::vector<Result> same = Launch(
      "same", {{0, 2, "--pp 2 --data corpus.txt", a}, {1, 2, "--pp 2 --data corpus.txt", c}});
  for (const Result& r : same) EXPECT_EQ(r.code, 0) << r.err;
}

TEST(HandLaunchTest, AWorldSizeGivenTwoWaysIsNamed) {
  ExpectStoppedNaming(Launch("world", {{0, 2, "--pp 2"}, {1, 4, "--pp 2"}}),
                      "world size (WORLD_SIZE) is 2 on rank 0 and 4 on rank 1");
}

TEST(HandLaunchTest, TwoProcessesClaimingOneRankAreNamed) {
  // Rank 1 twice: the second claimant stops at once, the run with it. The run is one that
  // only the claim ends (bounded by 60 s), so a claimant that starts late still meets it.
  constexpr int kLongRun = 100000;
  const std::vector<Result> one =
      Launch("rank1", {{0, 2, "--pp 2"}, {1, 2, "--pp 2"}, {1, 2, "--pp 2"}}, kLongRun);
  for (const Result& r : one) EXPECT_NE(r.code, 0) << r.err;
  int naming = 0;
  for (const Result& r : one)
    naming += r.err.find("two processes claim rank 1") != std::string::npos;
  EXPECT_GE(naming, 2) << one[0].err << one[1].err << one[2].err;  // rank 0 and the claimant
  EXPECT_NE(one[0].err.find("two processes claim rank 1"), std::string::npos) << one[0].err;
  // Rank 0 twice: the second cannot serve the store, finds the first serving it, and both stop.
  ExpectStoppedNaming(Launch("rank0", {{0, 2, "--pp 2"}, {0, 2, "--pp 2"}}, kLongRun),
                      "two processes claim rank 0");
}

// A rank stopped (SIGSTOP) with a --timeout below the default heartbeat window (20 s): the
// window follows the timeout (half of it, 5 s), so the stopped rank is blamed, not one
// waiting for it, and said to have been killed. The 5 s between the window and the timeout
// leave room for a busy machine (with --timeout 4 the window's 3 s left 1 s, once too little).
TEST(StallTest, AStoppedRankIsBlamedAndSaidToBeKilledWithAShortTimeout) {
  const std::string dir = ScratchWithCorpus("stall");
  const Result r =
      Shell("cd " + dir + "; timeout 90 " + CONVEYOR_BINARY +
            " train --pp 4 --layers 4 --timeout 10 --steps 100000 --sample-tokens 0 --eval-every 0 "
            "--data corpus.txt > out.txt 2>&1 & launcher=$!; "
            "for i in $(seq 1200); do grep -q 'step 1/' out.txt && break; sleep 0.1; done; "
            "rank2=$(ps -o pid= --ppid $(pgrep -P $launcher) | sort -n | sed -n 3p); "
            "kill -STOP $rank2; wait $launcher; echo \"exit $?\"; cat out.txt");
  EXPECT_NE(r.out.find("exit 1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("rank 2 stalled: no heartbeat for"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("rank 2 did not stop when the others did (it was stopped by signal"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("and was killed"), std::string::npos) << r.out;
}

// Under another launcher (here: by hand) a stalled rank that runs again before rank 0 leaves
// learns that it was blamed and exits kExitBlamed (76); rank 0 exits kExitPeerFailed (75).
// --timeout 10: a 5 s stall window, 5 s before rank 0's wait would time out.
TEST(StallTest, AStalledRankThatRunsAgainExitsAsTheOneBlamed) {
  const std::string dir = ScratchWithCorpus("blamed");
  const std::string env =
      "WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(PickFreePort()) + " ";
  const std::string job = std::string(CONVEYOR_BINARY) +
                          " train --pp 2 --layers 2 --timeout 10 --steps 100000 --sample-tokens 0 "
                          "--eval-every 0 --data corpus.txt";
  const Result r =
      Shell("cd " + dir + "; " + env + "RANK=0 LOCAL_RANK=0 " + job + " > r0.txt 2>&1 & r0=$!; " +
            "sleep 0.3; " + env + "RANK=1 LOCAL_RANK=1 " + job + " > r1.txt 2>&1 & r1=$!; " +
            "for i in $(seq 1200); do grep -q 'step 1/' r0.txt && break; sleep 0.1; done; "
            "kill -STOP $r1; "
            "for i in $(seq 600); do grep -q 'rank 1 stalled' r0.txt && break; sleep 0.1; done; "
            "kill -CONT $r1; wait $r0; echo \"rank 0 exit $?\"; wait $r1; echo \"rank 1 exit $?\"; "
            "cat r0.txt r1.txt");
  EXPECT_NE(r.out.find("rank 0 exit 75"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("rank 1 exit 76"), std::string::npos) << r.out;
  // Rank 1 says why it stopped, wherever the stop caught it: inside an action ("conveyor:
  // rank 1, stage 1, micro-batch ...") or in a collective between them ("conveyor: rank 1:
  // all-reduce #7 ...", seen with the machine loaded).
  EXPECT_TRUE(r.out.find("\nconveyor: rank 1, stage 1, ") != std::string::npos ||
              r.out.find("\nconveyor: rank 1: ") != std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("aborted: rank 1 stalled: no heartbeat for"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace conveyor
