#include "conveyor/sim/compute_sharing.h"

#include <gtest/gtest.h>

#include "conveyor/common/error.h"
#include "conveyor/schedule/program_testing.h"
#include "conveyor/schedule/registry.h"
#include "conveyor/sim/simulator.h"

namespace conveyor {
namespace {

// Every schedule at pp 4, m 8, its default chunks.
std::vector<std::pair<std::string, Program>> EverySchedule() {
  std::vector<std::pair<std::string, Program>> out;
  for (const ScheduleInfo& info : AllSchedules()) {
    out.emplace_back(std::string(info.name), BuildSchedule(info.name, ScheduleOptions{4, 8, 0}));
  }
  return out;
}

// Costs that differ by stage and op, with messages that take time.
CostModel Uneven(int stages) {
  CostModel c;
  for (int s = 0; s < stages; ++s)
    c.stages.push_back(StageCost{1.0 + 0.1 * s, 1.3, 0.6 + 0.05 * s});
  c.comm_latency = 0.07;
  c.optimizer = 0.4;
  return c;
}

TEST(ComputeSharingTest, RanksWithDevicesOfTheirOwnKeepEveryScheduleTimes) {
  for (const auto& [name, program] : EverySchedule()) {
    const CostModel alone = Uneven(program.layout.num_stages());
    CostModel placed = alone;
    // Ranks 0 and 1 on a device of capacity 2, the others alone: nothing is shared.
    placed.sharing = ComputeSharing{{0, 0, 1, 2}, {2, 1, 1}, {}};
    ASSERT_FALSE(placed.sharing.Shares());
    const SimResult a = Simulate(program, alone);
    const SimResult b = Simulate(program, placed);
    EXPECT_NEAR(a.makespan, b.makespan, 1e-9) << name;
    EXPECT_NEAR(a.steady_state_period, b.steady_state_period, 1e-9) << name;
    EXPECT_NEAR(a.bubble_fraction, b.bubble_fraction, 1e-9) << name;
    EXPECT_EQ(a.timeline.spans.size(), b.timeline.spans.size()) << name;
  }
}

TEST(ComputeSharingTest, OneCoreForEveryRankRunsAllTheWorkBackToBack) {
  for (const auto& [name, program] : EverySchedule()) {
    CostModel c = Uneven(program.layout.num_stages());
    c.comm_latency = 0;
    c.optimizer = 0;
    double work = 0;
    for (const auto& actions : program.ranks) {
      for (const Action& a : actions) {
        if (!IsCompute(a.op)) continue;
        const StageCost& s = c.cost(a.stage);
        switch (a.op) {
          case Op::kForward:
            work += s.f;
            break;
          case Op::kBackward:
            work += s.full_backward();
            break;
          case Op::kBackwardInput:
            work += s.i;
            break;
          case Op::kBackwardWeight:
            work += s.w;
            break;
          case Op::kOverlapFB:
            work += s.f + (a.overlap_op == Op::kBackwardInput
                               ? c.cost(a.overlap_stage).i
                               : c.cost(a.overlap_stage).full_backward());
            break;
          default:
            break;
        }
      }
    }
    c.sharing = ComputeSharing::OneDevice(program.layout.num_ranks(), 1);
    // Some rank can always run (no message takes time), so the one core never idles.
    EXPECT_NEAR(Simulate(program, c, SimOptions{1}).makespan, work, 1e-9 * work) << name;
  }
}

TEST(ComputeSharingTest, TwoCoresForFourRanksSlowThePipelineButNotPastAllTheWork) {
  const Program program = BuildSchedule("1f1b", ScheduleOptions{4, 8, 0});
  CostModel c = Uneven(4);
  const SimResult alone = Simulate(program, c, SimOptions{1});
  c.sharing = ComputeSharing::OneDevice(4, 2);
  const SimResult shared = Simulate(program, c, SimOptions{1});
  EXPECT_GT(shared.makespan, alone.makespan);
  double work = 0;
  for (double b : alone.busy) work += b;
  EXPECT_GE(shared.makespan, work / 2 - 1e-9);  // 2 cores do at most twice one's work
}

// Simulated under sharing, then de-contended: every span gives back its action's cost.
TEST(ComputeSharingTest, IntrinsicSecondsUndoTheSharingOfASimulatedStep) {
  for (const auto& [name, program] : EverySchedule()) {
    CostModel c = Uneven(program.layout.num_stages());
    c.optimizer = 0;  // the optimizer step is no span: its load would be invisible
    const CostModel alone = c;
    c.sharing = ComputeSharing{{0, 0, 0, 1}, {2, 0.5}, {}};
    const SimResult shared = Simulate(program, c, SimOptions{1});
    const SimResult reference = Simulate(program, alone, SimOptions{1});
    const std::vector<double> work = IntrinsicSeconds(shared.timeline, c.sharing);
    ASSERT_EQ(shared.timeline.spans.size(), reference.timeline.spans.size()) << name;
    // The same spans in another order: compare the multiset of (rank, action, work).
    std::map<std::pair<int, std::string>, double> want, got;
    for (const Span& s : reference.timeline.spans) {
      want[{s.rank, s.action.ToString()}] += s.end - s.start;
    }
    for (size_t i = 0; i < shared.timeline.spans.size(); ++i) {
      const Span& s = shared.timeline.spans[i];
      got[{s.rank, s.action.ToString()}] += work[i];
    }
    ASSERT_EQ(want.size(), got.size()) << name;
    for (const auto& [key, seconds] : want) {
      EXPECT_NEAR(got[key], seconds, 1e-9) << name << " rank " << key.first << " " << key.second;
    }
  }
}

TEST(ComputeSharingTest, IntrinsicSecondsCreditTheSharedPartAtItsRate) {
  Timeline t;
  t.num_ranks = 3;
  t.spans = {Span{0, Action{Op::kForward, 0, 0}, 0, 2}, Span{1, Action{Op::kForward, 1, 0}, 1, 3},
             Span{2, Action{Op::kForward, 2, 0}, 1, 3}};
  // Ranks 0 and 1 on one core; rank 2 alone on another.
  const ComputeSharing sharing{{0, 0, 1}, {1, 1}, {}};
  const std::vector<double> work = IntrinsicSeconds(t, sharing);
  EXPECT_DOUBLE_EQ(work[0], 1 + 0.5);  // alone on [0, 1], shared on [1, 2]
  EXPECT_DOUBLE_EQ(work[1], 0.5 + 1);
  EXPECT_DOUBLE_EQ(work[2], 2);
  EXPECT_EQ(IntrinsicSeconds(t, ComputeSharing{}), (std::vector<double>{2, 2, 2}));
}

TEST(ComputeSharingTest, GradientReductionsShareTheDeviceWithTheRanksComputes) {
  // One rank holding stages 0 and 1: F = 1, B = 2; stage 1's gradients are final at 4.
  const Program p = MakeProgram(Layout::Loop(1, 2, 1), {"0F0 1F0 1B0 0B0"});
  CostModel c;
  c.uniform = StageCost{1, 1, 1};
  c.reduce = {3, 3};
  // A device of its own (room for the channel too): stage 1 reduces over [4, 7] beside
  // 0B0, stage 0 over [7, 10].
  c.sharing = ComputeSharing::OneDevice(1, 2);
  SimResult r = Simulate(p, c, SimOptions{1});
  EXPECT_DOUBLE_EQ(r.makespan, 6);
  EXPECT_DOUBLE_EQ(r.reduced_end, 10);
  // One core: 0B0 and stage 1's reduction run at half speed from 4; 0B0 ends at 8 with 1
  // of the reduction's 3 left, done alone by 9; stage 0's then takes [9, 12].
  c.sharing = ComputeSharing::OneDevice(1, 1);
  r = Simulate(p, c, SimOptions{1});
  EXPECT_DOUBLE_EQ(r.makespan, 8);
  EXPECT_DOUBLE_EQ(r.reduced_end, 12);
  ASSERT_EQ(r.timeline.phases.size(), 2u);
  EXPECT_EQ(r.timeline.phases[0].name, "dp all-reduce stage 1");
  EXPECT_DOUBLE_EQ(r.timeline.phases[0].start, 4);
  EXPECT_DOUBLE_EQ(r.timeline.phases[0].end, 9);
  EXPECT_EQ(r.timeline.phases[1].track, PhaseTrack::kDataParallel);
  EXPECT_DOUBLE_EQ(r.timeline.phases[1].start, 9);
  EXPECT_DOUBLE_EQ(r.timeline.phases[1].end, 12);
}

TEST(ComputeSharingTest, EveryScheduleReducesEachStageOnceAndEndsItsStepsAfter) {
  for (const auto& [name, program] : EverySchedule()) {
    CostModel c = Uneven(program.layout.num_stages());
    c.reduce.assign(program.layout.num_stages(), 0.5);
    c.sharing = ComputeSharing::OneDevice(program.layout.num_ranks(), 2);
    const SimResult r = Simulate(program, c, SimOptions{4});
    EXPECT_EQ(r.timeline.phases.size(), static_cast<size_t>(program.layout.num_stages())) << name;
    EXPECT_GT(r.reduced_end, r.makespan) << name;  // the last stage's reduction follows it
    c.reduce.clear();
    const SimResult without = Simulate(program, c, SimOptions{4});
    EXPECT_GE(r.makespan, without.makespan - 1e-9) << name;  // reductions take cores
    EXPECT_GT(r.steady_state_period, without.steady_state_period) << name;
  }
}

TEST(ComputeSharingTest, SaysWhatIsSharedAndRefusesBadPlacements) {
  EXPECT_EQ(ComputeSharing::OneDevice(4, 2).Describe(), "4 ranks, room for 2 at full speed");
  EXPECT_EQ(ComputeSharing::OneDevice(2, 2).Describe(), "");
  EXPECT_FALSE(ComputeSharing::OneDevice(2, 2).Shares());
  EXPECT_DOUBLE_EQ(ComputeSharing::OneDevice(4, 2).Rate(0, 4), 0.5);
  EXPECT_DOUBLE_EQ(ComputeSharing::OneDevice(4, 2).Rate(0, 2), 1);
  EXPECT_THROW(CheckSharing(ComputeSharing{{0, 1}, {1}, {}}, 2), UserError);
  EXPECT_THROW(CheckSharing(ComputeSharing{{0, 0}, {0}, {}}, 2), UserError);
  EXPECT_THROW(CheckSharing(ComputeSharing{{0}, {1}, {}}, 2), UserError);
  EXPECT_NO_THROW(CheckSharing(ComputeSharing{}, 2));
  ComputeSharing bad = ComputeSharing::OneDevice(2, 2);
  bad.busy_capacity = {{0.9, 0}};
  EXPECT_THROW(CheckSharing(bad, 2), UserError);
}

// Measured rates for each busy count: 4 ranks taking turns on 2 cores run even one alone
// below full speed, and the sharing shows in the simulated step.
TEST(ComputeSharingTest, BusyCapacitiesGiveEachBusyCountItsMeasuredRate) {
  ComputeSharing s = ComputeSharing::OneDevice(4, 1.6);
  s.busy_capacity = {{0.8, 1.4, 1.5, 1.6}};
  EXPECT_DOUBLE_EQ(s.Rate(0, 1), 0.8);
  EXPECT_DOUBLE_EQ(s.Rate(0, 2), 0.7);
  EXPECT_DOUBLE_EQ(s.Rate(0, 4), 0.4);
  EXPECT_DOUBLE_EQ(s.Rate(0, 8), 0.2);  // beyond the curve: its last entry's work
  EXPECT_NO_THROW(CheckSharing(s, 4));
  ComputeSharing whole = ComputeSharing::OneDevice(2, 2);
  EXPECT_FALSE(whole.Shares());
  whole.busy_capacity = {{0.9, 2}};
  EXPECT_TRUE(whole.Shares());  // one rank alone runs at 0.9

  const Program program = BuildSchedule("naive", ScheduleOptions{2, 1, 0});  // one rank at a time
  CostModel c;
  c.sharing = ComputeSharing::OneDevice(2, 2);
  const double full = Simulate(program, c, SimOptions{1}).makespan;
  c.sharing.busy_capacity = {{0.5}};
  EXPECT_NEAR(Simulate(program, c, SimOptions{1}).makespan, 2 * full, 1e-9);
}

}  // namespace
}  // namespace conveyor
