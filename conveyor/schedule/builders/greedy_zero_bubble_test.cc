#include "conveyor/schedule/builders/greedy_zero_bubble.h"

#include <gtest/gtest.h>

#include "conveyor/common/error.h"
#include "conveyor/schedule/builders/zb_testing.h"
#include "conveyor/schedule/lower.h"
#include "conveyor/schedule/verify.h"

namespace conveyor {
namespace {

TEST(GreedyZeroBubbleTest, EveryLayoutGivesAVerifiedSplitBackwardProgram) {
  for (int p = 1; p <= 6; ++p) {
    for (int m = 1; m <= 3 * p + 1; ++m) {
      for (const Layout& layout : {Layout::Loop(p, 1, m), Layout::Loop(p, 3, m), Layout::V(p, m)}) {
        const Program program = GreedyZeroBubble(layout, 1);  // a cap it must relax
        ExpectSoundZbProgram(program, 1 << 20, layout.Describe());
        for (const auto& actions : program.ranks) {
          for (const Action& a : actions) EXPECT_NE(a.op, Op::kBackward);
        }
      }
      if (m >= 2)
        ExpectSoundZbProgram(GreedyZeroBubble(Layout::Dual(p, m), p + 1), 1 << 20, "dual");
    }
  }
}

TEST(GreedyZeroBubbleTest, PrefersInputGradientsOverForwardsOverWeights) {
  // One rank, two micro-batches: F0 I0 F1 I1 then the deferred W passes, oldest first.
  const Program program = GreedyZeroBubble(Layout::Loop(1, 1, 2), 2);
  EXPECT_EQ(program.ToText(), "rank 0: 0F0 0I0 0F1 0I1 0W0 0W1\n");
}

}  // namespace
}  // namespace conveyor
