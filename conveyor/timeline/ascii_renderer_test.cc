#include "conveyor/timeline/ascii_renderer.h"

#include <gtest/gtest.h>

#include <sstream>

#include "conveyor/common/error.h"
#include "conveyor/timeline/timeline_testing.h"

namespace conveyor {
namespace {

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(AsciiRendererTest, OneRowPerRankWithIdle) {
  // Rank 1 idles during [0, 1) and [3, 4).
  const Timeline t = MakeTimeline(
      2,
      {{0, "0F0", 0, 1}, {0, "0F1", 1, 2}, {0, "0B0", 4, 6}, {1, "1F0", 1, 2}, {1, "1B0", 2, 4}});
  const std::vector<std::string> lines = Lines(RenderAscii(t, 40));
  ASSERT_GE(lines.size(), 4u);
  EXPECT_EQ(lines[0].rfind("rank 0 |F0", 0), 0u) << lines[0];
  EXPECT_EQ(lines[1].rfind("rank 1 |.", 0), 0u) << lines[1];
  EXPECT_NE(lines[1].find("B0"), std::string::npos);
  EXPECT_EQ(lines[0].size(), 40u);
  EXPECT_EQ(lines[1].size(), 40u);
  EXPECT_NE(lines[0].find(".."), std::string::npos);    // idle during [2, 4)
  EXPECT_EQ(lines[2].find("rank"), std::string::npos);  // the axis
  EXPECT_NE(lines.back().find("legend"), std::string::npos);
  EXPECT_EQ(lines[3].rfind("time in units,", 0), 0u) << lines[3];
}

TEST(AsciiRendererTest, ExactScaleShowsEveryAction) {
  // 33 time units over 99 columns: 3 columns per unit, so every label fits.
  const Timeline t = GpipeTimeline(4, 8);
  const std::string text = RenderAscii(t, 99 + 9);
  const std::vector<std::string> lines = Lines(text);
  EXPECT_EQ(lines[0], "rank 0 |F0-F1-F2-F3-F4-F5-F6-F7-" + std::string(27, '.') +
                          "B0----B1----B2----B3----B4----B5----B6----B7----|");
  EXPECT_EQ(lines[3].substr(0, 20), "rank 3 |.........F0-");
}

TEST(AsciiRendererTest, AutoWidthIsReadableAndBounded) {
  const std::string small = RenderAscii(GpipeTimeline(4, 8));
  for (const std::string& line : Lines(small)) {
    if (line.rfind("rank", 0) == 0) {
      EXPECT_LE(line.size(), 100u);
    }
  }
  EXPECT_NE(small.find("F7"), std::string::npos);
  // 64 ranks, 1024 micro-batches: still one short line per rank.
  const std::string big = RenderAscii(GpipeTimeline(64, 1024));
  EXPECT_EQ(Lines(big).size(), 64u + 3);
  EXPECT_LT(big.size(), 10000u);
}

TEST(AsciiRendererTest, OverlapAndSplitBackwardLabels) {
  const Timeline t = MakeTimeline(
      1, {{0, "0F0", 0, 1}, {0, "(0F1;0I0)OVERLAP_F_B", 1, 3}, {0, "0W0", 3, 4}, {0, "0B1", 4, 6}});
  const std::string row = Lines(RenderAscii(t, 8 + 24 + 1))[0];
  EXPECT_EQ(row, "rank 0 |F0--F1+I0---W0--B1------|");
  // Two columns per unit: the overlapped unit's label does not fit, its kind letter does.
  EXPECT_EQ(Lines(RenderAscii(t, 8 + 12 + 1))[0], "rank 0 |F0X---W0B1--|");
}

TEST(AsciiRendererTest, RejectsBadWidthAndSpans) {
  const Timeline t = GpipeTimeline(2, 2);
  EXPECT_THROW(RenderAscii(t, 5), UserError);
  EXPECT_THROW(RenderAscii(t, 100000), UserError);
  Timeline bad = t;
  bad.spans.push_back(Span{7, Action{Op::kForward, 0, 0}, 0, 1});
  EXPECT_THROW(RenderAscii(bad), UserError);
}

TEST(AsciiRendererTest, EmptyTimeline) {
  Timeline t;
  t.num_ranks = 2;
  const std::vector<std::string> lines = Lines(RenderAscii(t));
  EXPECT_EQ(lines[0], "rank 0 |..........|");
}

}  // namespace
}  // namespace conveyor
