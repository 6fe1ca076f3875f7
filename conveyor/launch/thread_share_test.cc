#include "conveyor/launch/thread_share.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace conveyor {
namespace {

using ::testing::HasSubstr;

// A mask of CPUs [first, first + count).
std::vector<uint64_t> Cpus(int first, int count) {
  std::vector<uint64_t> mask(16, 0);
  for (int c = first; c < first + count; ++c) mask[c / 64] |= uint64_t{1} << (c % 64);
  return mask;
}

// `ranks` ranks on machine 7, each allowed CPUs [0, cores).
ThreadShareInput OneMachine(int ranks, int cores) {
  ThreadShareInput input;
  for (int r = 0; r < ranks; ++r) input.world.push_back({7, Cpus(0, cores)});
  return input;
}

TEST(ThreadShareTest, RanksOfOneMachineSplitItsCores) {
  ThreadShareInput input = OneMachine(2, 8);
  input.launcher_local = 2;
  input.launcher_variable = "OMPI_COMM_WORLD_LOCAL_SIZE=2";
  const ThreadShare share = ShareCores(input);
  EXPECT_EQ(share.threads, 4);
  EXPECT_EQ(share.line,
            "4 intra-op threads a rank: 2 ranks on this machine (OMPI_COMM_WORLD_LOCAL_SIZE=2) "
            "share the 8 cores they may run on");
  EXPECT_EQ(share.warning, "");
}

TEST(ThreadShareTest, MoreRanksThanCoresTakeOneThreadEachAndSaySo) {
  ThreadShareInput input = OneMachine(4, 2);  // no launcher variable: Slurm without one
  input.rank = 3;
  const ThreadShare share = ShareCores(input);
  EXPECT_EQ(share.threads, 1);
  EXPECT_EQ(share.line,
            "1 intra-op thread a rank: 4 ranks on this machine (found when the ranks met) share "
            "the 2 cores they may run on: more ranks than cores, which they take in turns");
  EXPECT_EQ(share.warning, "") << "nothing the user could lower";
  EXPECT_FALSE(share.first_on_machine);
}

TEST(ThreadShareTest, ALoneRankTakesEveryCoreItMayRunOn) {
  const ThreadShare share = ShareCores(OneMachine(1, 6));
  EXPECT_EQ(share.threads, 6);
  EXPECT_THAT(share.line, HasSubstr("1 rank on this machine (found when the ranks met) may run "
                                    "on 6 cores"));
}

TEST(ThreadShareTest, RanksBoundToCoresOfTheirOwnKeepThem) {
  ThreadShareInput input;
  input.world = {{7, Cpus(0, 2)}, {7, Cpus(2, 2)}, {7, Cpus(4, 1)}};
  input.rank = 1;
  EXPECT_EQ(ShareCores(input).threads, 2);
  EXPECT_THAT(ShareCores(input).line, HasSubstr("rank 1 may run on 2 cores of its own"));
  input.rank = 2;
  EXPECT_EQ(ShareCores(input).threads, 1);
  // Overlapping bindings: cores 0-3 for rank 0, 2-3 for rank 1: rank 0 has 2 + 2 x 1/2.
  input.world = {{7, Cpus(0, 4)}, {7, Cpus(2, 2)}};
  input.rank = 0;
  const ThreadShare share = ShareCores(input);
  EXPECT_EQ(share.threads, 3);
  EXPECT_THAT(share.line, HasSubstr("rank 0 may run on 4 cores, shared with up to 1 other rank"));
  input.rank = 1;
  EXPECT_EQ(ShareCores(input).threads, 1);
}

TEST(ThreadShareTest, EachMachineIsSharedByItsOwnRanks) {
  ThreadShareInput input;
  input.world = {{1, Cpus(0, 4)}, {1, Cpus(0, 4)}, {2, Cpus(0, 4)},
                 {2, Cpus(0, 4)}, {2, Cpus(0, 4)}, {2, Cpus(0, 4)}};
  input.rank = 0;
  EXPECT_EQ(ShareCores(input).threads, 2);
  EXPECT_TRUE(ShareCores(input).first_on_machine);
  input.rank = 2;
  EXPECT_EQ(ShareCores(input).threads, 1);
  EXPECT_TRUE(ShareCores(input).first_on_machine);
  input.rank = 5;
  EXPECT_FALSE(ShareCores(input).first_on_machine);
}

TEST(ThreadShareTest, ALauncherCountingMoreRanksHereThanReportedWins) {
  // Containers with host names of their own on one node: the launcher knows they share it.
  ThreadShareInput input = OneMachine(2, 8);
  input.world.push_back({9, Cpus(0, 8)});
  input.world.push_back({9, Cpus(0, 8)});
  input.launcher_local = 4;
  input.launcher_variable = "LOCAL_WORLD_SIZE=4";
  const ThreadShare share = ShareCores(input);
  EXPECT_EQ(share.threads, 2);
  EXPECT_THAT(share.line, HasSubstr("4 ranks on this machine (LOCAL_WORLD_SIZE=4)"));
  // Fewer than reported (nodes simulated in network namespaces of one machine): the reports.
  input.launcher_local = 1;
  input.launcher_variable = "LOCAL_WORLD_SIZE=1";
  EXPECT_EQ(ShareCores(input).threads, 4);
  EXPECT_THAT(ShareCores(input).line,
              HasSubstr("2 ranks on this machine (found when the ranks met)"));
}

TEST(ThreadShareTest, TheUsersChoiceWinsAndTooManyThreadsAreWarnedOf) {
  ThreadShareInput input = OneMachine(4, 2);
  input.threads_flag = 2;
  ThreadShare share = ShareCores(input);
  EXPECT_EQ(share.threads, 2);
  EXPECT_THAT(share.line, HasSubstr("2 intra-op threads a rank (--threads 2)"));
  EXPECT_EQ(share.warning,
            "--threads 2 with 4 ranks on 2 cores: 8 threads where 2 run at once, each rank "
            "waiting for the others' threads (without it each rank takes its share: 1 thread)");
  input.threads_flag = 1;
  EXPECT_EQ(ShareCores(input).warning, "");

  input.threads_flag = 0;
  input.omp_num_threads = "2,1";
  share = ShareCores(input);
  EXPECT_EQ(share.threads, 0) << "OpenMP reads its own variable";
  EXPECT_THAT(share.line, HasSubstr("intra-op threads as OMP_NUM_THREADS=2,1 says"));
  EXPECT_THAT(share.warning, HasSubstr("OMP_NUM_THREADS=2,1 with 4 ranks on 2 cores: 8 threads"));
  input.omp_num_threads = "1";
  EXPECT_EQ(ShareCores(input).warning, "");
  input.omp_num_threads = "abc";
  EXPECT_EQ(ShareCores(input).warning, "") << "OpenMP's to read";
}

}  // namespace
}  // namespace conveyor
