#include "conveyor/train/rank_measurements.h"

#include <gtest/gtest.h>

namespace conveyor {
namespace {

// A step of one rank: F of stage 0 for `f_s` seconds on micro-batches 0 and 1, one B of
// `b_s`, and a wait and a post, which are not compute.
Timeline Step(double f_s, double b_s) {
  Timeline t;
  t.spans.push_back(Span{0, Action{Op::kForward, 0, 0}, 0, f_s, SpanKind::kRun});
  t.spans.push_back(Span{0, Action{Op::kForward, 0, 1}, f_s, 2 * f_s, SpanKind::kRun});
  t.spans.push_back(Span{0, Action{Op::kBackward, 0, 0}, 3, 3 + b_s, SpanKind::kRun});
  t.spans.push_back(Span{0, Action{Op::kRecvB, 0, 0}, 2, 3, SpanKind::kWait});
  t.spans.push_back(Span{0, Action{Op::kSendF, 0, 0}, 1, 1.5, SpanKind::kPost});
  return t;
}

StepStats Stats(double seconds, double compute_s, double wait_s, int64_t sent_bytes) {
  StepStats s;
  s.seconds = seconds;
  s.compute_s = compute_s;
  s.comm_wait_s = wait_s;
  s.post_s = 0.5;
  s.sent_bytes = sent_bytes;
  return s;
}

CommBreakdown Comm(double dependency_s, double transfer_s, double in_flight_s,
                   double overlapped_s) {
  CommBreakdown c;
  c.dependency_wait_s = dependency_s;
  c.transfer_wait_s = transfer_s;
  c.in_flight_s = in_flight_s;
  c.overlapped_s = overlapped_s;
  return c;
}

TEST(RankMeasurementsTest, OneStepIsItsOwnMean) {
  RankMeasurements totals;
  totals.Add(Step(1, 2), Stats(10, 4, 5, 100), Comm(3, 2, 4, 1), 12, 1000);
  EXPECT_EQ(totals.measured_steps(), 0);
  EXPECT_EQ(totals.pipeline_s(), 12);
  const RankReport m = totals.Means(3);
  EXPECT_EQ(m.rank, 3);
  EXPECT_EQ(m.step_s, 10);
  EXPECT_EQ(m.compute_s, 4);
  EXPECT_EQ(m.comm_wait_s, 5);
  EXPECT_EQ(m.dependency_wait_s, 3);
  EXPECT_EQ(m.transfer_wait_s, 2);
  EXPECT_EQ(m.post_s, 0.5);
  EXPECT_EQ(m.idle_s, 6);
  EXPECT_EQ(m.bubble_fraction, 0.6);
  EXPECT_EQ(m.comm_overlap, 0.25);
  EXPECT_EQ(m.sent_bytes, 100);
  EXPECT_EQ(m.peak_activation_bytes, 1000);
  EXPECT_EQ(m.predicted_peak_microbatches, 0);
  const auto& ops = totals.op_times();
  ASSERT_EQ(ops.size(), 2u) << "F and B of stage 0; waits and posts are not compute";
  EXPECT_EQ(ops.at({0, Op::kForward}).seconds, 2);
  EXPECT_EQ(ops.at({0, Op::kForward}).count, 2);
  EXPECT_EQ(ops.at({0, Op::kBackward}).seconds, 2);
  EXPECT_EQ(ops.at({0, Op::kBackward}).count, 1);
}

// The first step's sums go when the second comes; the peak covers all steps.
TEST(RankMeasurementsTest, TheFirstStepIsDroppedFromTheMeans) {
  RankMeasurements totals;
  totals.Add(Step(100, 100), Stats(1000, 900, 50, 7), Comm(1, 1, 1, 1), 1000, 5000);
  totals.Add(Step(1, 2), Stats(10, 4, 5, 100), Comm(3, 2, 4, 1), 12, 1000);
  totals.Add(Step(3, 4), Stats(20, 6, 7, 300), Comm(5, 2, 4, 3), 14, 2000);
  EXPECT_EQ(totals.measured_steps(), 2);
  EXPECT_EQ(totals.pipeline_s(), 13);
  const RankReport m = totals.Means(0);
  EXPECT_EQ(m.step_s, 15);
  EXPECT_EQ(m.compute_s, 5);
  EXPECT_EQ(m.comm_wait_s, 6);
  EXPECT_EQ(m.dependency_wait_s, 4);
  EXPECT_EQ(m.transfer_wait_s, 2);
  EXPECT_EQ(m.comm_overlap, 0.5);
  EXPECT_EQ(m.sent_bytes, 200);
  EXPECT_EQ(m.peak_activation_bytes, 5000);
  EXPECT_EQ(totals.op_times().at({0, Op::kForward}).seconds, 8);
  EXPECT_EQ(totals.op_times().at({0, Op::kForward}).count, 4);
}

}  // namespace
}  // namespace conveyor
