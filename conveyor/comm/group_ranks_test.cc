#include "conveyor/comm/group_ranks.h"

#include <gtest/gtest.h>

#include "conveyor/common/error.h"

namespace conveyor {
namespace {

TEST(GroupRanksTest, SubgroupMapsPositionsToWorldRanksAndNamesThem) {
  GroupRanks world = GroupRanks::World(4, 3);
  EXPECT_EQ(world.Self(), "rank 3");
  GroupRanks group = world.Subgroup({3, 1});
  EXPECT_TRUE(group.member());
  EXPECT_EQ(group.rank(), 0);
  EXPECT_EQ(group.world_rank(1), 1);
  EXPECT_EQ(group.Describe("recv", "from", 1, 7),
            "rank 3 (rank 0 of group [3, 1]): recv from rank 1 (tag 7)");
  EXPECT_FALSE(world.Subgroup({0, 1}).member());
}

TEST(GroupRanksTest, RejectsBadGroupsAndPeers) {
  GroupRanks world = GroupRanks::World(2, 0);
  EXPECT_THROW(world.Subgroup({0, 2}), UserError);
  EXPECT_THROW(world.Subgroup({1, 1}), UserError);
  EXPECT_THROW(world.CheckPeer("send", 0, 0), UserError);
  EXPECT_THROW(world.CheckPeer("send", -1, 0), UserError);
  EXPECT_NO_THROW(world.CheckPeer("send", 1, GroupRanks::kMaxTag));
  EXPECT_THROW(world.CheckPeer("send", 1, GroupRanks::kMaxTag + 1), UserError);
  EXPECT_THROW(GroupRanks::World(2, 2), UserError);
}

TEST(GroupRanksTest, RootMustBeARankOfTheGroup) {
  GroupRanks group = GroupRanks::World(4, 3).Subgroup({3, 1});
  EXPECT_NO_THROW(group.CheckRoot("broadcast", 0));
  EXPECT_NO_THROW(group.CheckRoot("broadcast", 1));
  EXPECT_THROW(group.CheckRoot("broadcast", -1), UserError);
  try {
    group.CheckRoot("broadcast", 2);
    ADD_FAILURE() << "root 2 of a group of 2 was accepted";
  } catch (const UserError& e) {
    EXPECT_STREQ(e.what(),
                 "rank 3 (rank 0 of group [3, 1]): broadcast from root 2: the root must be a rank "
                 "in [0, 2)");
  }
}

}  // namespace
}  // namespace conveyor
