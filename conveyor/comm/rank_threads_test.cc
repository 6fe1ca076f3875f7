#include "conveyor/comm/rank_threads.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>

#include "conveyor/comm/local_transport.h"

namespace conveyor {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Ranks 0 and 1 wait for rank 2, which fails: the error names rank 2 and its reason, not
// rank 0, which only stopped because of it.
TEST(RankThreadsTest, TheRankThatFailedFirstIsNamedNotThePeersItStopped) {
  TransportOptions options;
  options.timeout = std::chrono::seconds(30);
  const auto world = LocalWorld(3, options);
  std::string error;
  try {
    RunRankThreads(world, [&](int rank) {
      if (rank == 2) CONVEYOR_CHECK(false) << "bad input on rank two";
      world[rank]->Recv(at::empty({1}), 2, 0)->Wait();
    });
  } catch (const UserError& e) {
    error = e.what();
  }
  EXPECT_THAT(error, HasSubstr("rank 2 (thread) failed: "));
  EXPECT_THAT(error, HasSubstr("bad input on rank two"));
  EXPECT_THAT(error, Not(HasSubstr("rank 0 (thread)")));
}

TEST(RankThreadsTest, EveryRankRunsAndNothingIsThrownWhenAllSucceed) {
  const auto world = LocalWorld(4);
  std::vector<int> ran(4, 0);
  RunRankThreads(world, [&](int rank) {
    world[rank]->Barrier();
    ran[rank] = 1;
  });
  EXPECT_EQ(ran, std::vector<int>({1, 1, 1, 1}));
}

}  // namespace
}  // namespace conveyor
