#include "conveyor/schedule/builders/zb_h2.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "conveyor/schedule/activation_memory.h"
#include "conveyor/schedule/builders/builder_testing.h"
#include "conveyor/schedule/builders/zb_testing.h"

namespace conveyor {
namespace {

TEST(ZbH2Test, SoundForEveryShape) {
  for (int p = 1; p <= 8; ++p) {
    for (int m = 1; m <= 3 * p + 1; ++m) {
      const Program program = BuildZbH2({.pp = p, .microbatches = m});
      ExpectSoundProgram(program, p, 1, m, /*split_backward=*/true);
      ExpectSoundZbProgram(program, std::min(2 * p - 1, m),
                           "p=" + std::to_string(p) + " m=" + std::to_string(m));
    }
  }
}

TEST(ZbH2Test, RankZeroWarmsUpWithTwicePMinusOneForwards) {
  // The first I reaches rank 0 after 2p - 1 forwards (F and I chains through p ranks).
  const Program program = BuildZbH2({.pp = 4, .microbatches = 12});
  EXPECT_EQ(LeadingForwards(program.ranks[0]), 7);
  EXPECT_EQ(LeadingForwards(program.ranks[3]), 1);
  EXPECT_EQ(PeakInFlight(program)[0], 7);
}

TEST(ZbH2Test, Preconditions) { ExpectSingleChunkPreconditions(BuildZbH2, "zb-h2"); }

}  // namespace
}  // namespace conveyor
