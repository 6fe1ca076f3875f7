#include "conveyor/schedule/program.h"

#include <gtest/gtest.h>

#include <string>

namespace conveyor {
namespace {

// What `action` waits for: the producer Ready() names, or "ready".
std::string WaitsFor(const Progress& progress, const char* action) {
  Action missing;
  return progress.Ready(ParseAction(action), &missing) ? "ready" : missing.ToString();
}

TEST(ProgressTest, ForwardWaitsForThePreviousStage) {
  const Layout layout = Layout::Loop(2, 1, 2);
  Progress progress(layout);
  EXPECT_EQ(WaitsFor(progress, "0F0"), "ready");
  EXPECT_EQ(WaitsFor(progress, "1F0"), "0F0");
  progress.MarkDone(ParseAction("0F0"));
  EXPECT_EQ(WaitsFor(progress, "1F0"), "ready");
  EXPECT_EQ(WaitsFor(progress, "1F1"), "0F1");
}

TEST(ProgressTest, BackwardWaitsForItsForwardAndTheNextStagesInputGradient) {
  const Layout layout = Layout::Loop(2, 1, 1);
  Progress progress(layout);
  progress.MarkDone(ParseAction("0F0"));
  EXPECT_EQ(WaitsFor(progress, "1I0"), "1F0");
  progress.MarkDone(ParseAction("1F0"));
  EXPECT_EQ(WaitsFor(progress, "1I0"), "ready");  // the last stage needs only its F
  EXPECT_EQ(WaitsFor(progress, "0B0"), "1I0");
  EXPECT_EQ(WaitsFor(progress, "1W0"), "1I0");
  progress.MarkDone(ParseAction("1B0"));  // a full backward finishes the input gradient too
  EXPECT_EQ(WaitsFor(progress, "0B0"), "ready");
  EXPECT_EQ(WaitsFor(progress, "1W0"), "ready");
}

TEST(ProgressTest, OverlapNeedsAndFinishesBothHalves) {
  const Layout layout = Layout::Loop(2, 1, 2);
  Progress progress(layout);
  constexpr char kOverlap[] = "(1F1;1B0)OVERLAP_F_B";
  progress.MarkDone(ParseAction("0F0"));
  progress.MarkDone(ParseAction("1F0"));
  EXPECT_EQ(WaitsFor(progress, kOverlap), "0F1");
  progress.MarkDone(ParseAction("0F1"));
  EXPECT_EQ(WaitsFor(progress, kOverlap), "ready");
  progress.MarkDone(ParseAction(kOverlap));
  EXPECT_EQ(WaitsFor(progress, "0B0"), "ready");
  EXPECT_EQ(WaitsFor(progress, "1B1"), "ready");
}

TEST(ProgressTest, ReadyAtIsTheLatestArrivalWithTransferTimeAcrossRanks) {
  // V placement on 2 ranks: stages 0 and 3 on rank 0, stages 1 and 2 on rank 1.
  const Layout layout = Layout::V(2, 1);
  Progress progress(layout);
  double at = -1;
  EXPECT_TRUE(progress.ReadyAt(ParseAction("0F0"), 10, &at));
  EXPECT_EQ(at, 0);  // consumes nothing
  EXPECT_FALSE(progress.ReadyAt(ParseAction("1F0"), 10, &at));
  progress.MarkDone(ParseAction("0F0"), 2);
  EXPECT_TRUE(progress.ReadyAt(ParseAction("1F0"), 10, &at));
  EXPECT_EQ(at, 12);  // stage 0 is on another rank
  progress.MarkDone(ParseAction("1F0"), 5);
  EXPECT_TRUE(progress.ReadyAt(ParseAction("2F0"), 10, &at));
  EXPECT_EQ(at, 5);  // stage 1 shares rank 1
  progress.MarkDone(ParseAction("2F0"), 7);
  progress.MarkDone(ParseAction("3F0"), 30);
  progress.MarkDone(ParseAction("3I0"), 31);
  EXPECT_TRUE(progress.ReadyAt(ParseAction("2I0"), 10, &at));
  EXPECT_EQ(at, 41);  // the later of its own F (7) and 3I0 from rank 0 (31 + 10)
}

}  // namespace
}  // namespace conveyor
