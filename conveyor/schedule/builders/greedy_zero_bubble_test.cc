// ZB-H2 and interleaved ZB, both orders recorded by the greedy zero-bubble scheduler.
#include "conveyor/schedule/builders/greedy_zero_bubble.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "conveyor/common/error.h"
#include "conveyor/schedule/builders/interleaved_zb.h"
#include "conveyor/schedule/builders/zb_h2.h"
#include "conveyor/schedule/lower.h"
#include "conveyor/schedule/verify.h"

namespace conveyor {
namespace {

void ExpectVerified(const Program& program, const std::string& what) {
  EXPECT_FALSE(program.has_comms()) << what;
  const auto findings = Verify(program);
  EXPECT_TRUE(findings.empty()) << what << "\n" << FormatFindings(findings);
  try {
    const Program lowered = Lower(program);
    EXPECT_TRUE(Verify(lowered).empty()) << what << "\n" << FormatFindings(Verify(lowered));
  } catch (const Error& e) {
    ADD_FAILURE() << what << ": " << e.what();
  }
}

int MaxPeak(const Program& program) {
  const auto peaks = PeakInFlight(program);
  return *std::max_element(peaks.begin(), peaks.end());
}

TEST(GreedyZeroBubbleTest, EveryLayoutGivesAVerifiedSplitBackwardProgram) {
  for (int p = 1; p <= 6; ++p) {
    for (int m = 1; m <= 3 * p + 1; ++m) {
      for (const Layout& layout : {Layout::Loop(p, 1, m), Layout::Loop(p, 3, m), Layout::V(p, m)}) {
        const Program program = GreedyZeroBubble(layout, 1);  // a cap it must relax
        ExpectVerified(program, layout.Describe());
        for (const auto& actions : program.ranks) {
          for (const Action& a : actions) EXPECT_NE(a.op, Op::kBackward);
        }
      }
      if (m >= 2) ExpectVerified(GreedyZeroBubble(Layout::Dual(p, m), p + 1), "dual");
    }
  }
}

TEST(GreedyZeroBubbleTest, PrefersInputGradientsOverForwardsOverWeights) {
  // One rank, two micro-batches: F0 I0 F1 I1 then the deferred W passes, oldest first.
  const Program program = GreedyZeroBubble(Layout::Loop(1, 1, 2), 2);
  EXPECT_EQ(program.ToText(), "rank 0: 0F0 0I0 0F1 0I1 0W0 0W1\n");
}

TEST(ZbH2Test, SoundForEveryPpAndMicrobatchesWithinMemory) {
  for (int p = 1; p <= 8; ++p) {
    for (int m = 1; m <= 3 * p + 1; ++m) {
      const Program program = BuildZbH2(ScheduleOptions{p, m, 0});
      const std::string what = "zb-h2 p=" + std::to_string(p) + " m=" + std::to_string(m);
      ExpectVerified(program, what);
      EXPECT_LE(MaxPeak(program), 2 * p - 1) << what;
    }
  }
}

TEST(ZbH2Test, RejectsBadOptionsNamingThem) {
  EXPECT_THROW(BuildZbH2(ScheduleOptions{0, 4, 0}), UserError);
  EXPECT_THROW(BuildZbH2(ScheduleOptions{2, 0, 0}), UserError);
  try {
    BuildZbH2(ScheduleOptions{2, 4, 2});
    FAIL();
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("2"), std::string::npos) << e.what();
  }
}

TEST(InterleavedZbTest, SoundForEveryMicrobatchCount) {
  for (int p = 1; p <= 6; ++p) {
    for (int v = 2; v <= 4; ++v) {
      for (int m = 1; m <= 3 * p + 1; ++m) {
        const Program program = BuildInterleavedZb(ScheduleOptions{p, m, v});
        EXPECT_EQ(program.layout.stages_per_rank(), v);
        ExpectVerified(program, "interleaved-zb p=" + std::to_string(p) +
                                    " v=" + std::to_string(v) + " m=" + std::to_string(m));
      }
    }
  }
}

TEST(InterleavedZbTest, RejectsOneChunk) {
  EXPECT_EQ(BuildInterleavedZb(ScheduleOptions{2, 4, 0}).layout.stages_per_rank(), 2);
  EXPECT_THROW(BuildInterleavedZb(ScheduleOptions{2, 4, 1}), UserError);
}

}  // namespace
}  // namespace conveyor
