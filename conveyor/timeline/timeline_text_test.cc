#include "conveyor/timeline/timeline_text.h"

#include <gtest/gtest.h>

#include <string>

#include "conveyor/common/error.h"

namespace conveyor {
namespace {

Timeline OneOfEach() {
  Timeline t;
  t.spans.push_back(Span{0, ParseAction("1F3"), 0.1, 0.30000000000000004, SpanKind::kRun});
  t.spans.push_back(Span{0, ParseAction("2SEND_B5"), 1e-9, 2.5, SpanKind::kPost});
  t.spans.push_back(Span{0, ParseAction("(0F1;3B2)OVERLAP_F_B"), 3, 4, SpanKind::kWait});
  t.phases.push_back(Phase{0, "sum shared grads", 4.25, 4.5, PhaseTrack::kDataParallel});
  t.counters.push_back(CounterSample{0, "activation bytes", 1.0 / 3.0, 123456789.0});
  return t;
}

TEST(TimelineTextTest, EventsComeBackExactlyWithTheReadersRank) {
  const Timeline sent = OneOfEach();
  Timeline got;
  DecodeTimelineText(EncodeTimelineText(sent), 7, got);
  ASSERT_EQ(got.spans.size(), 3u);
  ASSERT_EQ(got.phases.size(), 1u);
  ASSERT_EQ(got.counters.size(), 1u);
  for (size_t i = 0; i < sent.spans.size(); ++i) {
    EXPECT_EQ(got.spans[i].rank, 7);
    EXPECT_EQ(got.spans[i].action, sent.spans[i].action);
    EXPECT_EQ(got.spans[i].kind, sent.spans[i].kind);
    EXPECT_EQ(got.spans[i].start, sent.spans[i].start);  // bit for bit
    EXPECT_EQ(got.spans[i].end, sent.spans[i].end);
  }
  EXPECT_EQ(got.phases[0].name, "sum shared grads");
  EXPECT_EQ(got.phases[0].track, PhaseTrack::kDataParallel);
  EXPECT_EQ(got.phases[0].start, 4.25);
  EXPECT_EQ(got.phases[0].rank, 7);
  EXPECT_EQ(got.counters[0].name, "activation bytes");
  EXPECT_EQ(got.counters[0].time, 1.0 / 3.0);
  EXPECT_EQ(got.counters[0].value, 123456789.0);
}

TEST(TimelineTextTest, EveryMalformedLineIsRefusedNamingRankAndLine) {
  const std::string good = "S 0 1 2 0F0\n";
  for (const std::string bad :
       {"X 0 1 2 0F0", "S 3 1 2 0F0", "S 0 1 0.5 0F0", "S 0 1 2", "S 0 1 2 0Q0", "S 0 nan 2 0F0",
        "P 1 2 4 step", "P 1 2 0", "C 1 inf name", "C 1 2", "S", ""}) {
    Timeline into;
    try {
      DecodeTimelineText(good + bad + "\n", 3, into);
      ADD_FAILURE() << "accepted \"" << bad << "\"";
    } catch (const UserError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("rank 3's timeline, line 2"), std::string::npos) << what;
    }
    EXPECT_TRUE(into.spans.empty()) << "a refused text added events: \"" << bad << "\"";
  }
}

TEST(TimelineTextTest, ANameWithALineBreakIsABug) {
  Timeline t;
  t.phases.push_back(Phase{0, "two\nlines", 0, 1, PhaseTrack::kStep});
  EXPECT_THROW(EncodeTimelineText(t), InternalError);
}

}  // namespace
}  // namespace conveyor
