#include "conveyor/comm/scatter_parts.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "conveyor/common/error.h"

namespace conveyor {
namespace {

using ::testing::HasSubstr;

TEST(ScatterPartsTest, PartsFollowEachOtherInRankOrder) {
  const ScatterParts parts(GroupRanks::World(3, 1), at::arange(5), {2, 0, 3});
  EXPECT_EQ(parts.size(), 3);
  EXPECT_EQ(parts.begin(0), 0);
  EXPECT_EQ(parts.begin(1), 2);
  EXPECT_EQ(parts.count(1), 0);
  EXPECT_EQ(parts.begin(2), 2);
  EXPECT_TRUE(parts.Of(at::arange(5), 2).equal(at::arange(2, 5)));
  EXPECT_EQ(ScatterParts::Format(parts.counts()), "[2, 0, 3]");
}

TEST(ScatterPartsTest, BadCountsNameTheRankAndTheValues) {
  const GroupRanks group = GroupRanks::World(4, 2).Subgroup({2, 0});
  try {
    ScatterParts(group, at::zeros({4}), {3, 2});
    ADD_FAILURE() << "counts [3, 2] split 4 elements";
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), HasSubstr("rank 2 (rank 0 of group [2, 0]): reduce-scatter with counts "
                                    "[3, 2]: they sum to 5 but the input has 4 elements"));
  }
  EXPECT_THROW(ScatterParts(group, at::zeros({4}), {4}), UserError);
}

TEST(ScatterPartsTest, AnAllToAllSideSplitsRowsAndNamesItsSide) {
  const ScatterParts parts =
      ScatterParts::AllToAllSide(GroupRanks::World(3, 0), {1, 0, 2}, 3, "send");
  EXPECT_EQ(parts.begin(2), 1);
  EXPECT_EQ(parts.total(), 3);
  EXPECT_TRUE(parts.Of(at::arange(6).view({3, 2}), 2).equal(at::arange(2, 6).view({2, 2})));
  EXPECT_EQ(ScatterParts::AllToAllSide(GroupRanks::World(2, 1), {4, 5}, -1, "receive").total(), 9);
  try {
    ScatterParts::AllToAllSide(GroupRanks::World(2, 1), {1, 1}, 3, "send");
    ADD_FAILURE() << "counts [1, 1] split 3 rows";
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), HasSubstr("rank 1: all-to-all with send counts [1, 1]: they sum to 2 "
                                    "but the input has 3 rows"));
  }
}

}  // namespace
}  // namespace conveyor
