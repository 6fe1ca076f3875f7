// Zero-bubble schedules against the one-directional lower bound: with F = I = W = 1 and no
// communication, no single step can beat 3vm + p - 1 (the last rank cannot start before
// p - 1 and has 3vm units of work). ZB-H2, ZB-V, interleaved ZB and DualPipeV reach it once
// m is large enough; ZB-H2 and ZB-V are zero bubble in the steady state (3vm per step when
// steps run back to back).
#include <gtest/gtest.h>

#include <algorithm>

#include "conveyor/schedule/builders/dualpipe.h"
#include "conveyor/schedule/builders/dualpipe_v.h"
#include "conveyor/schedule/builders/interleaved_zb.h"
#include "conveyor/schedule/builders/zb_h2.h"
#include "conveyor/schedule/builders/zb_v.h"
#include "conveyor/sim/simulator.h"

namespace conveyor {
namespace {

SimResult Unit(const Program& program) {
  CostModel costs;
  costs.uniform = StageCost{1, 1, 1};
  return Simulate(program, costs, SimOptions{8});
}

double Bound(int p, int m, int v) { return 3.0 * v * m + p - 1; }

TEST(ClosedFormsZbTest, ZbH2ReachesTheBoundAndZeroBubbleFrom2p) {
  for (int p = 1; p <= 8; ++p) {
    for (int m = 2 * p; m <= 4 * p; m += p) {
      const SimResult r = Unit(BuildZbH2(ScheduleOptions{p, m, 0}));
      EXPECT_DOUBLE_EQ(r.makespan, Bound(p, m, 1)) << "p=" << p << " m=" << m;
      EXPECT_DOUBLE_EQ(r.steady_state_period, 3.0 * m) << "p=" << p << " m=" << m;
      EXPECT_LE(*std::max_element(r.peak_activations.begin(), r.peak_activations.end()), 2 * p - 1);
    }
  }
}

TEST(ClosedFormsZbTest, ZbVReachesTheBoundAndZeroBubbleFrom2p) {
  for (int p = 1; p <= 8; ++p) {
    for (int m = 2 * p; m <= 4 * p; m += p) {
      const SimResult r = Unit(BuildZbV(ScheduleOptions{p, m, 0}));
      EXPECT_DOUBLE_EQ(r.makespan, Bound(p, m, 2)) << "p=" << p << " m=" << m;
      EXPECT_DOUBLE_EQ(r.steady_state_period, 6.0 * m) << "p=" << p << " m=" << m;
    }
  }
}

TEST(ClosedFormsZbTest, InterleavedZbReachesTheBoundForMultiplesOfP) {
  for (int p = 1; p <= 8; ++p) {
    for (int v = 2; v <= 4; ++v) {
      for (int m = 2 * p; m <= 4 * p; m += p) {
        EXPECT_DOUBLE_EQ(Unit(BuildInterleavedZb(ScheduleOptions{p, m, v})).makespan,
                         Bound(p, m, v))
            << "p=" << p << " v=" << v << " m=" << m;
      }
    }
  }
}

TEST(ClosedFormsZbTest, DualPipeVReachesTheBoundFrom2p) {
  // An OVERLAP_F_B unit costs F + B here (no gain from overlapping on this cost model).
  for (int p = 1; p <= 8; ++p) {
    for (int m = 2 * p; m <= 4 * p; m += p) {
      EXPECT_DOUBLE_EQ(Unit(BuildDualPipeV(ScheduleOptions{p, m, 0})).makespan, Bound(p, m, 2))
          << "p=" << p << " m=" << m;
    }
  }
}

TEST(ClosedFormsZbTest, DualPipeBeatsOneDirectionWithTwoCopies) {
  // Two directions fill the pipeline from both ends: with stages of 1/p of the model (2x
  // parameters), a step takes less than a one-directional zero-bubble step would,
  // 3m + p - 1, and every rank works 3m of it.
  for (int p = 2; p <= 8; p += 2) {
    for (int m = 2 * p; m <= 4 * p; m += 2 * p) {
      const SimResult r = Unit(BuildDualPipe(ScheduleOptions{p, m, 0}));
      EXPECT_LT(r.makespan, Bound(p, m, 1)) << "p=" << p << " m=" << m;
      for (double busy : r.busy) EXPECT_DOUBLE_EQ(busy, 3.0 * m);
    }
  }
}

}  // namespace
}  // namespace conveyor
