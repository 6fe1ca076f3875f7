#include "conveyor/optim/shard_layout.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "conveyor/common/error.h"

namespace conveyor {
namespace {

TEST(ShardLayoutTest, RangesCoverTheVectorInNearEqualParts) {
  EXPECT_EQ(ShardLayout::Range(10, 3, 0), (std::pair<int64_t, int64_t>{0, 4}));
  EXPECT_EQ(ShardLayout::Range(10, 3, 1), (std::pair<int64_t, int64_t>{4, 7}));
  EXPECT_EQ(ShardLayout::Range(10, 3, 2), (std::pair<int64_t, int64_t>{7, 10}));
  EXPECT_EQ(ShardLayout::Range(1, 2, 1), (std::pair<int64_t, int64_t>{1, 1}));
}

// 6 + 4 + 5 = 15 elements in 2 ranges: [0, 8) and [8, 15).
TEST(ShardLayoutTest, OffsetsFollowTheOrderAndOverlapsClipToRanges) {
  const NamedTensors params = {
      {"a", at::zeros({2, 3})}, {"tied", at::zeros({4})}, {"c", at::zeros({5})}};
  const ShardLayout layout(params, 2, 1, {"tied"});
  EXPECT_EQ(layout.numel(), 15);
  EXPECT_EQ(layout.index(), 1);
  EXPECT_EQ(layout.range(1), (std::pair<int64_t, int64_t>{8, 15}));
  EXPECT_EQ(layout.OffsetOf(params[1].second), 6);
  EXPECT_EQ(layout.OffsetOf(params[2].second), 10);
  EXPECT_THROW(layout.OffsetOf(at::zeros({4})), InternalError);  // another tensor
  EXPECT_TRUE(layout.scattered("a"));
  EXPECT_FALSE(layout.scattered("tied"));
  EXPECT_EQ(layout.Overlap(6, 4, 0), (std::pair<int64_t, int64_t>{6, 8}));
  EXPECT_EQ(layout.Overlap(6, 4, 1), (std::pair<int64_t, int64_t>{8, 10}));
  EXPECT_EQ(layout.Overlap(0, 6, 1), (std::pair<int64_t, int64_t>{6, 6}));     // none, at the end
  EXPECT_EQ(layout.Overlap(10, 5, 0), (std::pair<int64_t, int64_t>{10, 10}));  // at the start
}

}  // namespace
}  // namespace conveyor
