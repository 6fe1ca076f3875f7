#include "conveyor/schedule/layout.h"

#include <gtest/gtest.h>

#include "conveyor/common/error.h"

namespace conveyor {
namespace {

TEST(LayoutTest, LoopPlacement) {
  const Layout l = Layout::Loop(4, 2, 8);
  EXPECT_EQ(l.num_stages(), 8);
  EXPECT_EQ(l.rank_of(5), 1);
  EXPECT_EQ(l.stages_of(1), (std::vector<int>{1, 5}));
  EXPECT_EQ(l.prev_stage(0), -1);
  EXPECT_EQ(l.next_stage(3), 4);
  EXPECT_TRUE(l.is_last_stage(7));
  EXPECT_EQ(l.chunks_per_rank(), 2);
}

TEST(LayoutTest, VPlacement) {
  const Layout l = Layout::V(4, 8);
  EXPECT_EQ(l.stages_of(0), (std::vector<int>{0, 7}));
  EXPECT_EQ(l.stages_of(3), (std::vector<int>{3, 4}));
  EXPECT_EQ(l.next_stage(3), 4);
  EXPECT_TRUE(l.runs(7, 7));
}

TEST(LayoutTest, DualHasTwoPipelinesAndSplitsMicrobatches) {
  const Layout l = Layout::Dual(4, 9);
  EXPECT_EQ(l.directions(), 2);
  EXPECT_EQ(l.pipeline_length(), 4);
  EXPECT_EQ(l.next_stage(3), -1);
  EXPECT_EQ(l.prev_stage(4), -1);
  EXPECT_EQ(l.rank_of(4), 3);  // part 0 of the reverse pipeline starts on the last rank
  EXPECT_EQ(l.part_of(6), 2);
  EXPECT_EQ(l.first_microbatch(0), 0);
  EXPECT_EQ(l.end_microbatch(0), 5);
  EXPECT_EQ(l.first_microbatch(5), 5);
  EXPECT_FALSE(l.runs(5, 2));
}

TEST(LayoutTest, RejectsBadSizesNamingThem) {
  EXPECT_THROW(Layout::Loop(0, 1, 1), UserError);
  EXPECT_THROW(Layout::Loop(2, 0, 1), UserError);
  EXPECT_THROW(Layout::V(2, 0), UserError);
  try {
    Layout::Custom(3, {0, 1, 1}, 4, 1);
    FAIL();
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("rank 2 holds no stage"), std::string::npos);
  }
}

}  // namespace
}  // namespace conveyor
