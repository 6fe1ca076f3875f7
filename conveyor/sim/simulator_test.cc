#include "conveyor/sim/simulator.h"

#include <gtest/gtest.h>

#include "conveyor/schedule/lower.h"
#include "conveyor/schedule/program_testing.h"

namespace conveyor {
namespace {

CostModel Uniform(double f, double i, double w) {
  CostModel c;
  c.uniform = StageCost{f, i, w};
  return c;
}

const std::vector<std::string> kGpipe2x2 = {"0F0 0F1 0B0 0B1", "1F0 1F1 1B0 1B1"};

TEST(SimulatorTest, GpipeTwoRanksTwoMicrobatches) {
  const Program p = MakeProgram(Layout::Loop(2, 1, 2), kGpipe2x2);
  const SimResult r = Simulate(p, Uniform(1, 1, 1));
  // (m + p - 1)(F + B) = 3 * 3.
  EXPECT_DOUBLE_EQ(r.makespan, 9);
  EXPECT_EQ(r.busy, (std::vector<double>{6, 6}));
  EXPECT_EQ(r.idle, (std::vector<double>{3, 3}));
  EXPECT_DOUBLE_EQ(r.bubble_fraction, 1.0 / 3);
  EXPECT_EQ(r.peak_activations, (std::vector<double>{2, 2}));
  EXPECT_EQ(r.p2p_messages, 4);
  ASSERT_EQ(r.timeline.spans.size(), 8u);
  // Rank 1's first backward starts right after its second forward, at 3.
  for (const Span& s : r.timeline.spans) {
    if (s.rank == 1 && s.action == Action{Op::kBackward, 1, 0}) {
      EXPECT_DOUBLE_EQ(s.start, 3);
      EXPECT_DOUBLE_EQ(s.end, 5);
    }
  }
}

TEST(SimulatorTest, LoweredAndComputeOnlyAgree) {
  const Program p = MakeProgram(Layout::Loop(2, 1, 2), kGpipe2x2);
  CostModel c = Uniform(1, 2, 1);
  c.comm_latency = 0.25;
  const SimResult a = Simulate(p, c);
  const SimResult b = Simulate(Lower(p), c);
  EXPECT_DOUBLE_EQ(a.makespan, b.makespan);
  EXPECT_EQ(a.p2p_messages, b.p2p_messages);
}

TEST(SimulatorTest, CommunicationDelaysEveryHop) {
  const Program p = MakeProgram(Layout::Loop(2, 1, 1), {"0F0 0B0", "1F0 1B0"});
  CostModel c = Uniform(1, 1, 1);
  c.comm_latency = 0.5;
  c.comm_bandwidth = 100;
  c.message_bytes = 50;  // 0.5 on the wire
  // F, hop (1), F, B, hop (1), B: 1 + 1 + 1 + 2 + 1 + 2.
  const SimResult r = Simulate(p, c);
  EXPECT_DOUBLE_EQ(r.makespan, 8);
  EXPECT_DOUBLE_EQ(r.p2p_bytes, 100);
}

TEST(SimulatorTest, SplitBackwardMemoryFollowsMbAndMw) {
  // One rank, two micro-batches, W deferred to the end.
  const Program p = MakeProgram(Layout::Loop(1, 1, 2), {"0F0 0I0 0F1 0I1 0W0 0W1"});
  CostModel c = Uniform(1, 1, 1);
  EXPECT_EQ(Simulate(p, c).peak_activations, (std::vector<double>{2}));  // I frees nothing
  c.mem_w = 0.25;  // I frees 3/4 of each micro-batch
  EXPECT_EQ(Simulate(p, c).peak_activations, (std::vector<double>{1.25}));
  c.mem_w = 2;
  EXPECT_THROW(Simulate(p, c), UserError);
}

TEST(SimulatorTest, OverlapCostDefaultsToSumAndCanBeCheaper) {
  const Program p = MakeProgram(Layout::Loop(1, 1, 2), {"0F0 (0F1;0B0)OVERLAP_F_B 0B1"});
  CostModel c = Uniform(1, 1, 1);
  EXPECT_DOUBLE_EQ(Simulate(p, c).makespan, 1 + 3 + 2);
  c.uniform.overlap = 2;
  EXPECT_DOUBLE_EQ(Simulate(p, c).makespan, 1 + 2 + 2);
}

TEST(SimulatorTest, PairsAtOnceHideOneHalfsCommunicationUnderTheOthersCompute) {
  const Program p = MakeProgram(Layout::Loop(1, 1, 2), {"0F0 (0F1;0B0)OVERLAP_F_B 0B1"});
  CostModel c = Uniform(3, 2, 2);  // F 3, B 4
  c.uniform.comm_f = 1;            // of F, waiting on its all-to-alls
  c.uniform.comm_b = 2;            // of B
  // Pairs one after the other: F + B, whatever they wait on.
  EXPECT_DOUBLE_EQ(Simulate(p, c).makespan, 3 + 7 + 4);
  // At once: the unit's compute (2 + 2) stretched by neither half (3, 4): 4.
  c.pairs_at_once = true;
  EXPECT_DOUBLE_EQ(Simulate(p, c).makespan, 3 + 4 + 4);
  // Compute-bound: nothing to wait on, the halves' sum.
  c.uniform.comm_f = c.uniform.comm_b = 0;
  EXPECT_DOUBLE_EQ(Simulate(p, c).makespan, 3 + 7 + 4);
  // Communication-bound: the longer half (F waiting 2.5 of its 3, B 3.5 of its 4).
  c.uniform.comm_f = 2.5, c.uniform.comm_b = 3.5;
  EXPECT_DOUBLE_EQ(Simulate(p, c).makespan, 3 + 4 + 4);
  c.uniform.f = 6;  // F's compute 3.5 and B's 0.5: F's 6 bounds it
  EXPECT_DOUBLE_EQ(Simulate(p, c).makespan, 6 + 6 + 4);
}

TEST(SimulatorTest, ARankAloneStartsItsNextStepOnceItsLastReductionEnds) {
  // On a shared device, the last reduction of a lone rank's step ends with nothing else
  // pending: the next step must still start (it once stalled there).
  const Program p = MakeProgram(Layout::Loop(1, 1, 1), {"0F0 0B0"});
  CostModel c = Uniform(1, 1, 1);
  c.sharing = ComputeSharing::OneDevice(1, 0.5);
  c.reduce = {1};
  const SimResult r = Simulate(p, c, {.steady_state_steps = 4});
  EXPECT_DOUBLE_EQ(r.makespan, 6);         // F and B at half speed
  EXPECT_DOUBLE_EQ(r.reduced_end, 6 + 2);  // then the reduction
  EXPECT_GT(r.steady_state_period, 0);
}

TEST(SimulatorTest, SteadyStatePeriodOverlapsSteps) {
  // Rank 1 ends the step with a long W that rank 0 need not wait for: back to back, the
  // next step's forward on rank 0 overlaps it, and the period is rank 1's busy time (7),
  // below the single-step makespan (8).
  const Program p = MakeProgram(Layout::Loop(2, 1, 1), {"0F0 0B0", "1F0 1I0 1W0"});
  CostModel c = Uniform(1, 1, 1);
  c.stages = {StageCost{1, 1, 1}, StageCost{1, 1, 5}};
  const SimResult r = Simulate(p, c, {.steady_state_steps = 8});
  EXPECT_DOUBLE_EQ(r.makespan, 8);
  EXPECT_DOUBLE_EQ(r.steady_state_period, 7);
  // A rank's optimizer step lengthens the period.
  c.optimizer = 1;
  EXPECT_DOUBLE_EQ(Simulate(p, c, {.steady_state_steps = 8}).steady_state_period, 8);
  EXPECT_EQ(Simulate(p, c, {.steady_state_steps = 1}).steady_state_period, 0);
}

TEST(SimulatorTest, GpipePeriodEqualsMakespan) {
  // In GPipe rank 0 finishes last, so nothing of the next step can start earlier.
  const Program p = MakeProgram(Layout::Loop(2, 1, 2), kGpipe2x2);
  EXPECT_DOUBLE_EQ(Simulate(p, Uniform(1, 1, 1)).steady_state_period, 9);
}

TEST(SimulatorTest, OverlapWithoutGainRunsHalvesAsTheirInputsArrive) {
  // Rank 1's unit pairs the forward of micro-batch 1 (input there at 2) with the backward of
  // micro-batch 0 (ready at once): the forward half must not wait for anything else.
  const Program p =
      MakeProgram(Layout::Loop(2, 1, 2), {"0F0 0F1 0B0 0B1", "1F0 (1F1;1B0)OVERLAP_F_B 1B1"});
  CostModel c = Uniform(1, 1, 1);
  c.comm_latency = 1;
  // rank 1: F0 [2,3]; F1 [3,4] (input at 3); B0 [4,6]; B1 [6,8]; rank 0 B0 [7,9], B1 [9,11].
  const SimResult r = Simulate(p, c);
  EXPECT_DOUBLE_EQ(r.makespan, 11);
  EXPECT_EQ(r.timeline.spans.size(), 8u);
}

TEST(SimulatorTest, DeadlockedProgramThrows) {
  const Program p = MakeProgram(Layout::Loop(2, 1, 1), {"0F0 0B0", "1B0 1F0"});
  EXPECT_THROW(Simulate(p, Uniform(1, 1, 1)), DeadlockError);
}

}  // namespace
}  // namespace conveyor
