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

}  // namespace
}  // namespace conveyor
