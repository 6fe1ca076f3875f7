#include "conveyor/schedule/builders/gpipe.h"

#include <gtest/gtest.h>

#include "conveyor/schedule/activation_memory.h"
#include "conveyor/schedule/builders/builder_testing.h"
#include "conveyor/schedule/verify.h"

namespace conveyor {
namespace {

TEST(GpipeTest, SoundOverGrid) {
  for (int p = 1; p <= 8; ++p) {
    for (int m = 1; m <= 3 * p + 1; ++m) {
      SCOPED_TRACE("p=" + std::to_string(p) + " m=" + std::to_string(m));
      ExpectSoundProgram(BuildGpipe({.pp = p, .microbatches = m}), p, 1, m, false);
    }
  }
}

TEST(GpipeTest, AllForwardsThenAllBackwardsInOrder) {
  const int p = 4, m = 6;
  const Program program = BuildGpipe({.pp = p, .microbatches = m});
  for (int r = 0; r < p; ++r) {
    ASSERT_EQ(program.ranks[r].size(), 2u * m);
    for (int i = 0; i < m; ++i) {
      EXPECT_EQ(program.ranks[r][i], (Action{Op::kForward, r, i}));
      EXPECT_EQ(program.ranks[r][m + i], (Action{Op::kBackward, r, i}));
    }
  }
}

TEST(GpipeTest, EveryRankHoldsAllMicrobatches) {
  for (int p = 1; p <= 6; ++p) {
    for (int m = 1; m <= 2 * p + 1; ++m) {
      EXPECT_EQ(PeakInFlight(BuildGpipe({.pp = p, .microbatches = m})), std::vector<int>(p, m))
          << "p=" << p << " m=" << m;
    }
  }
}

TEST(GpipeTest, Preconditions) { ExpectSingleChunkPreconditions(BuildGpipe, "gpipe"); }

}  // namespace
}  // namespace conveyor
