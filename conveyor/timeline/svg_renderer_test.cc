#include "conveyor/timeline/svg_renderer.h"

#include <gtest/gtest.h>

#include <regex>
#include <vector>

#include "conveyor/common/error.h"
#include "conveyor/timeline/timeline_testing.h"

namespace conveyor {
namespace {

size_t Count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) {
    ++n;
  }
  return n;
}

// The text of the element <g class="name">...</g> (no nested groups inside).
std::string Group(const std::string& svg, const std::string& name) {
  const size_t start = svg.find("<g class=\"" + name + "\">");
  const size_t end = svg.find("</g>", start);
  return start == std::string::npos ? "" : svg.substr(start, end - start);
}

// Every element opened is closed, in order; no stray '<' or '&' in text.
bool WellFormed(const std::string& xml) {
  std::vector<std::string> open;
  const std::regex tag(R"(<(/?)([A-Za-z?][\w:-]*)([^<>]*?)(/?)>)");
  size_t last = 0;
  for (auto it = std::sregex_iterator(xml.begin(), xml.end(), tag); it != std::sregex_iterator();
       ++it) {
    const std::string between = xml.substr(last, it->position() - last);
    if (between.find('<') != std::string::npos) return false;
    if (std::regex_search(between, std::regex(R"(&(?!(amp|lt|gt|quot|apos);))"))) return false;
    last = it->position() + it->length();
    const std::string name = (*it)[2];
    if (name[0] == '?') continue;
    if ((*it)[1] == "/") {
      if (open.empty() || open.back() != name) return false;
      open.pop_back();
    } else if ((*it)[4] != "/") {
      open.push_back(name);
    }
  }
  return open.empty() && xml.find('<', last) == std::string::npos;
}

// Two chunks per rank: stages 0 and 2 on rank 0, 1 and 3 on rank 1.
Timeline TwoChunks() {
  return MakeTimeline(2, {{0, "0F0", 0, 1},
                          {1, "1F0", 1, 2},
                          {0, "2F0", 2, 3},
                          {1, "3F0", 3, 4},
                          {1, "3B0", 4, 6},
                          {0, "(2F1;2I0)OVERLAP_F_B", 6, 8},
                          {0, "2W0", 8, 9}});
}

TEST(SvgRendererTest, OneBoxPerSpanAndRowsPerRank) {
  Timeline t = GpipeTimeline(3, 4);
  const std::string svg = RenderSvg(t);
  EXPECT_TRUE(WellFormed(svg));
  EXPECT_EQ(Count(Group(svg, "spans"), "<rect"), t.spans.size());
  EXPECT_EQ(Count(svg, "<rect class=\"bg\""), 3u + 1);  // a row per rank + the legend's idle
  for (const char* rank : {">rank 0<", ">rank 1<", ">rank 2<"}) {
    EXPECT_NE(svg.find(rank), std::string::npos) << rank;
  }
  EXPECT_EQ(svg.rfind("<?xml", 0), 0u);
  EXPECT_NE(svg.find("<svg xmlns=\"http://www.w3.org/2000/svg\""), std::string::npos);
}

TEST(SvgRendererTest, LegendAxisAndLabels) {
  const std::string svg = RenderSvg(GpipeTimeline(2, 2));
  const std::string legend = Group(svg, "legend");
  EXPECT_NE(legend.find("forward (F)"), std::string::npos);
  EXPECT_NE(legend.find("full backward (B)"), std::string::npos);
  EXPECT_NE(legend.find("idle"), std::string::npos);
  EXPECT_EQ(legend.find("backward for weights"), std::string::npos);  // no W in it
  EXPECT_NE(svg.find("time (units)"), std::string::npos);
  EXPECT_NE(svg.find("<title>0F1 on rank 0: 1 to 2</title>"), std::string::npos);
  EXPECT_NE(Group(svg, "spans").find(">1</text>"), std::string::npos);
  SvgOptions no_labels;
  no_labels.labels = false;
  EXPECT_EQ(Group(RenderSvg(GpipeTimeline(2, 2), no_labels), "spans").find("<text"),
            std::string::npos);
}

TEST(SvgRendererTest, KindsAndChunksHaveTheirOwnColours) {
  const std::string svg = RenderSvg(TwoChunks());
  EXPECT_TRUE(WellFormed(svg));
  const std::string spans = Group(svg, "spans");
  EXPECT_EQ(Count(spans, "<rect class=\"F\""), 2u);   // 0F0, 1F0: first chunks
  EXPECT_EQ(Count(spans, "<rect class=\"F2\""), 2u);  // 2F0, 3F0: second chunks
  EXPECT_EQ(Count(spans, "<rect class=\"B2\""), 1u);
  EXPECT_EQ(Count(spans, "<rect class=\"X2\""), 1u);  // overlap, forward half on stage 2
  EXPECT_EQ(Count(spans, "<rect class=\"W2\""), 1u);
  EXPECT_NE(spans.find(">1/0</text>"), std::string::npos);
  EXPECT_NE(Group(svg, "legend").find("lighter: a rank&apos;s 2nd chunk"), std::string::npos);
  EXPECT_NE(svg.find(".X2{fill:"), std::string::npos);
}

TEST(SvgRendererTest, EscapesText) {
  SvgOptions options;
  options.title = "1F1B <p=2> & \"m\"";
  const std::string svg = RenderSvg(GpipeTimeline(2, 2), options);
  EXPECT_TRUE(WellFormed(svg));
  EXPECT_NE(svg.find("1F1B &lt;p=2&gt; &amp; &quot;m&quot;"), std::string::npos);
}

TEST(SvgRendererTest, NamesTheTimeUnit) {
  Timeline t = GpipeTimeline(2, 2);
  t.time_unit = TimeUnit::kSeconds;
  const std::string svg = RenderSvg(t);
  EXPECT_NE(svg.find("time (s)"), std::string::npos);
  EXPECT_EQ(svg.find("time (units)"), std::string::npos);
}

TEST(SvgRendererTest, CommSpansAreThinBands) {
  Timeline t = GpipeTimeline(2, 1);
  t.spans.push_back(Span{0, ParseAction("0SEND_F0"), 1, 1.5});
  t.spans.push_back(Span{1, ParseAction("1RECV_F0"), 1, 1});  // takes no time: not drawn
  const std::string svg = RenderSvg(t);
  EXPECT_EQ(Count(Group(svg, "spans"), "<rect class=\"C\""), 1u);
  EXPECT_NE(Group(svg, "legend").find("SEND / RECV"), std::string::npos);
}

TEST(SvgRendererTest, BigProgramsStayBounded) {
  const Timeline t = GpipeTimeline(64, 1024);
  ASSERT_GT(t.spans.size(), size_t{kMaxSvgBoxes});
  const std::string svg = RenderSvg(t);
  EXPECT_TRUE(WellFormed(svg));
  EXPECT_LT(svg.size(), 2'000'000u);
  EXPECT_LE(Count(Group(svg, "spans"), "<rect"), 64u * 1600);
  EXPECT_EQ(Count(Group(svg, "spans"), "<text"), 0u);  // no labels
}

TEST(SvgRendererTest, RejectsBadOptions) {
  SvgOptions options;
  options.width = 5;
  EXPECT_THROW(RenderSvg(GpipeTimeline(2, 2), options), UserError);
  options.width = 0;
  options.row_height = 1000;
  EXPECT_THROW(RenderSvg(GpipeTimeline(2, 2), options), UserError);
}

}  // namespace
}  // namespace conveyor
