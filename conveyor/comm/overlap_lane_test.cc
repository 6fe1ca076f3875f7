#include "conveyor/comm/overlap_lane.h"

#include <gtest/gtest.h>

#include <thread>

#include "conveyor/comm/local_transport.h"

namespace conveyor {
namespace {

// A thread is in lane 0 until a scope says otherwise; scopes nest and restore; another
// thread keeps its own lane; each lane finds its own group, lane 1 lane 0's when it has none.
TEST(OverlapLaneTest, EachThreadPicksItsLanesGroup) {
  auto lane0 = LocalWorld(1), lane1 = LocalWorld(1);
  const LaneGroups groups{lane0[0].get(), lane1[0].get()};
  const LaneGroups shared{lane0[0].get(), nullptr};
  EXPECT_EQ(OverlapLane(), 0);
  EXPECT_EQ(groups.Current(), lane0[0].get());
  {
    const OverlapLaneScope scope(1);
    EXPECT_EQ(OverlapLane(), 1);
    EXPECT_EQ(groups.Current(), lane1[0].get());
    EXPECT_EQ(shared.Current(), lane0[0].get());
    std::thread other([&] {
      EXPECT_EQ(OverlapLane(), 0);
      EXPECT_EQ(groups.Current(), lane0[0].get());
    });
    other.join();
    {
      const OverlapLaneScope inner(0);
      EXPECT_EQ(groups.Current(), lane0[0].get());
    }
    EXPECT_EQ(OverlapLane(), 1);
  }
  EXPECT_EQ(OverlapLane(), 0);
}

}  // namespace
}  // namespace conveyor
