#include "conveyor/profile/step_recorder.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "conveyor/comm/local_transport.h"
#include "conveyor/comm/rank_threads.h"
#include "conveyor/profile/memory_tracker.h"
#include "conveyor/runtime/pipeline_rank.h"
#include "conveyor/runtime/synthetic_stage.h"
#include "conveyor/schedule/lower.h"
#include "conveyor/schedule/registry.h"

namespace conveyor {
namespace {

std::vector<MicroBatch> Microbatches(int n, int m) {
  Batch batch;
  batch.inputs = at::ones({n, 64}, at::kLong);
  batch.targets = at::zeros({n, 64}, at::kLong);
  return SplitBatch(batch, m);
}

// Rank 0 of `program` alone, on synthetic stages; `program` must outlive it.
PipelineRank SyntheticRank(const Program& program) {
  return PipelineRank(
      program, 0, nullptr, [](int stage) { return MakeSyntheticStage(stage, SyntheticCosts{}); },
      at::kFloat);
}

TEST(StepRecorderTest, RecordsSpansPhasesAndCounters) {
  ASSERT_TRUE(MemoryTracker::Install());
  // One rank running two stages, two micro-batches.
  const Program program = Lower(BuildSchedule("interleaved-1f1b", ScheduleOptions{1, 2, 2}));
  PipelineRank rank = SyntheticRank(program);
  const double origin = Executor::Now();
  StepRecorder recorder(0, 1, origin);
  recorder.Attach(rank.executor());
  for (int step = 0; step < 2; ++step) {
    recorder.BeginStep();
    rank.Step(Microbatches(4, 2));
    const double start = Executor::Now();
    recorder.Phase("optimizer", start);
    recorder.Phase("all-reduce", origin + 1, origin + 3, PhaseTrack::kTensorParallel);
  }
  const Timeline& t = recorder.step();
  EXPECT_EQ(t.spans.size(), program.ranks[0].size());  // one compute span per action
  for (const Span& s : t.spans) {
    EXPECT_EQ(s.kind, SpanKind::kRun);
    EXPECT_GE(s.start, 0);
  }
  ASSERT_EQ(t.phases.size(), 2u);  // the last step's only
  EXPECT_EQ(t.phases[0].name, "optimizer");
  EXPECT_EQ(t.phases[0].track, PhaseTrack::kStep);
  EXPECT_GE(t.phases[0].start, t.spans.back().end);
  EXPECT_EQ(t.phases[1].track, PhaseTrack::kTensorParallel);
  EXPECT_DOUBLE_EQ(t.phases[1].start, 1);  // relative to the origin
  EXPECT_DOUBLE_EQ(t.phases[1].end, 3);
  // Two counters at the step's start and after every span.
  EXPECT_EQ(t.counters.size(), 2 * (t.spans.size() + 1));
  double most_held = 0;
  for (const CounterSample& c : t.counters) {
    if (c.name == "activation bytes") most_held = std::max(most_held, c.value);
    if (c.name == "bytes sent") {
      EXPECT_EQ(c.value, 0);  // one rank sends nothing
    }
  }
  EXPECT_GT(most_held, 0);
  EXPECT_GE(recorder.PeakBytes(), most_held);  // the peak between samples is no lower
  const std::map<int, double> forward = recorder.ForwardBytes();
  ASSERT_EQ(forward.size(), 2u);
  EXPECT_GT(forward.at(0), 0);
}

// Device times (as Executor::device_runs() gives them on a GPU) replace the computes' host
// times; the counters sampled at a compute's end move with it and stay in time order.
TEST(StepRecorderTest, DeviceTimesReplaceTheComputesHostTimes) {
  const Program program = Lower(BuildSchedule("gpipe", ScheduleOptions{1, 2, 0}));
  PipelineRank rank = SyntheticRank(program);
  const double origin = Executor::Now();
  StepRecorder recorder(0, 1, origin);
  recorder.Attach(rank.executor());
  recorder.BeginStep();
  rank.Step(Microbatches(4, 2));
  EXPECT_TRUE(rank.executor().device_runs().empty());  // the CPU: host times only
  recorder.UseDeviceTimes({});                         // nothing changes
  std::vector<Span> runs = recorder.step().spans;
  ASSERT_EQ(runs.size(), 4u);  // F0 F1 B0 B1
  for (size_t i = 0; i < runs.size(); ++i) {
    runs[i].start = origin + 10 + 2.0 * static_cast<double>(i);
    runs[i].end = runs[i].start + 1;
  }
  recorder.UseDeviceTimes(runs);
  const Timeline& t = recorder.step();
  for (size_t i = 0; i < runs.size(); ++i) {
    EXPECT_DOUBLE_EQ(t.spans[i].start, 10 + 2.0 * static_cast<double>(i));
    EXPECT_DOUBLE_EQ(t.spans[i].end, 11 + 2.0 * static_cast<double>(i));
  }
  ASSERT_EQ(t.counters.size(), 2 * (runs.size() + 1));
  EXPECT_LT(t.counters[1].time, 10);  // the step's start keeps its host time
  EXPECT_DOUBLE_EQ(t.counters.back().time, 17);
  for (size_t i = 1; i < t.counters.size(); ++i) {
    EXPECT_LE(t.counters[i - 1].time, t.counters[i].time);
  }
  std::swap(runs[0], runs[2]);  // a forward's time given to a backward
  EXPECT_THROW(recorder.UseDeviceTimes(runs), Error);
}

TEST(StepRecorderTest, RanksOnOneHostShareTheOrigin) {
  auto world = LocalWorld(3);
  std::vector<double> origins(3);
  RunRankThreads(world, [&](int r) { origins[r] = SharedClockOrigin(world[r].get()); });
  EXPECT_EQ(origins[0], origins[1]);
  EXPECT_EQ(origins[0], origins[2]);
  EXPECT_LE(origins[0], Executor::Now());
}

}  // namespace
}  // namespace conveyor
