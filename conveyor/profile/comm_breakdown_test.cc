#include "conveyor/profile/comm_breakdown.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace conveyor {
namespace {

Timeline Measured(int ranks) {
  Timeline t;
  t.num_ranks = ranks;
  t.time_unit = TimeUnit::kSeconds;
  return t;
}

Span At(int rank, const char* action, SpanKind kind, double start, double end) {
  return Span{rank, ParseAction(action), start, end, kind};
}

TEST(CommBreakdownTest, SplitsWaitsAtTheSendersPosting) {
  const Layout layout = Layout::Loop(2, 1, 2);
  Timeline sender = Measured(2), receiver = Measured(2);
  sender.spans = {At(0, "0SEND_F0", SpanKind::kPost, 1.1, 1.2),
                  At(0, "0SEND_F1", SpanKind::kPost, 1.9, 2.0),
                  At(0, "0F1", SpanKind::kRun, 1.2, 1.9)};
  receiver.spans = {
      At(1, "1RECV_F0", SpanKind::kWait, 1.0, 1.5),   // 0.2 for the sender, 0.3 in transit
      At(1, "1RECV_F1", SpanKind::kWait, 3.0, 3.01),  // here long before it was needed
      At(1, "1SEND_B0", SpanKind::kWait, 4.0, 4.1),   // the end-of-step wait for a send
      At(1, "1F0", SpanKind::kRun, 1.5, 3.0)};
  std::vector<double> posted = SendPostTimes(layout, sender);
  ASSERT_EQ(posted.size(), 8u);
  EXPECT_EQ(std::count(posted.begin(), posted.end(), 0.0), 6);
  const CommBreakdown b = BreakDownComm(layout, receiver, 1, posted);
  EXPECT_EQ(b.messages, 2);
  EXPECT_NEAR(b.dependency_wait_s, 0.2, 1e-12);
  EXPECT_NEAR(b.transfer_wait_s, 0.3 + 0.01 + 0.1, 1e-12);
  EXPECT_NEAR(b.in_flight_s, 0.3 + 1.01, 1e-12);
  EXPECT_NEAR(b.overlapped_s, 1.0, 1e-12);
  EXPECT_NEAR(b.overlap_fraction(), 1.0 / 1.31, 1e-12);
  // Spans of other ranks are not this rank's waits.
  EXPECT_EQ(BreakDownComm(layout, receiver, 0, posted).messages, 0);
  EXPECT_EQ(CommBreakdown{}.overlap_fraction(), 1.0);
}

TEST(CommBreakdownTest, GradientsAndVShapeSlots) {
  // V placement: stage 1 sits on rank 1, stage 2 on rank 1 too; stage 3 on rank 0.
  const Layout layout = Layout::V(2, 1);
  Timeline t = Measured(2);
  t.spans = {At(0, "3SEND_B0", SpanKind::kPost, 0, 2), At(1, "2RECV_B0", SpanKind::kWait, 1, 3)};
  const std::vector<double> posted = SendPostTimes(layout, t);
  const CommBreakdown b = BreakDownComm(layout, t, 1, posted);
  EXPECT_NEAR(b.dependency_wait_s, 1, 1e-12);
  EXPECT_NEAR(b.transfer_wait_s, 1, 1e-12);
  EXPECT_NEAR(b.overlap_fraction(), 0, 1e-12);
}

}  // namespace
}  // namespace conveyor
