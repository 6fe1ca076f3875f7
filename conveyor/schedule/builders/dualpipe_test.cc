// DualPipe: the phase programs and the fallback for inputs the phases cannot take.
#include "conveyor/schedule/builders/dualpipe.h"

#include <gtest/gtest.h>

#include "conveyor/common/error.h"
#include "conveyor/schedule/builders/zb_testing.h"
#include "conveyor/schedule/lower.h"
#include "conveyor/schedule/verify.h"

namespace conveyor {
namespace {

int Overlaps(const Program& program) {
  int n = 0;
  for (const auto& actions : program.ranks) {
    for (const Action& a : actions) n += a.op == Op::kOverlapFB;
  }
  return n;
}

TEST(DualPipeTest, PhasesForEvenPpAndEnoughMicrobatches) {
  for (int p = 2; p <= 8; p += 2) {
    for (int m = 2 * p; m <= 4 * p; m += 2) {
      const Program program = BuildDualPipe(ScheduleOptions{p, m, 0});
      const std::string what = "dualpipe p=" + std::to_string(p) + " m=" + std::to_string(m);
      EXPECT_EQ(program.layout.directions(), 2) << what;
      ExpectSoundZbProgram(program, 1 << 20, what);
      EXPECT_GT(Overlaps(program), 0) << what;
    }
  }
}

TEST(DualPipeTest, OtherInputsFallBackToAVerifiedOrder) {
  for (int p = 1; p <= 7; ++p) {
    for (int m = 2; m <= 2 * p + 3; ++m) {
      if (p % 2 == 0 && m % 2 == 0 && m >= 2 * p) continue;
      const Program program = BuildDualPipe(ScheduleOptions{p, m, 0});
      const std::string what = "dualpipe p=" + std::to_string(p) + " m=" + std::to_string(m);
      ExpectSoundZbProgram(program, 1 << 20, what);
      EXPECT_EQ(Overlaps(program), 0) << what;
    }
  }
  EXPECT_THROW(BuildDualPipe(ScheduleOptions{4, 1, 0}), UserError);
  EXPECT_THROW(BuildDualPipe(ScheduleOptions{4, 8, 3}), UserError);
}

TEST(DualPipeTest, FirstRankRunsTheForwardDirectionFirst) {
  const Program program = BuildDualPipe(ScheduleOptions{4, 8, 0});
  // Rank 0: 2(p/2 - 0 - 1) = 2 forwards of stage 0, then stage 0 and stage 7 alternate.
  const auto& r0 = program.ranks[0];
  EXPECT_EQ(r0[0].ToString(), "0F0");
  EXPECT_EQ(r0[1].ToString(), "0F1");
  EXPECT_EQ(r0[2].ToString(), "0F2");
  EXPECT_EQ(r0[3].ToString(), "7F4");
  // Rank 3 mirrors it on the reverse direction (stage 4 = part 0 for micro-batches 4..7).
  EXPECT_EQ(program.ranks[3][0].ToString(), "4F4");
}

}  // namespace
}  // namespace conveyor
