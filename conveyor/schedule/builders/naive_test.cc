#include "conveyor/schedule/builders/naive.h"

#include <gtest/gtest.h>

#include "conveyor/schedule/activation_memory.h"
#include "conveyor/schedule/builders/builder_testing.h"
#include "conveyor/schedule/verify.h"

namespace conveyor {
namespace {

TEST(NaiveTest, SoundOverGrid) {
  for (int p = 1; p <= 8; ++p) {
    for (int m = 1; m <= 3 * p + 1; ++m) {
      SCOPED_TRACE("p=" + std::to_string(p) + " m=" + std::to_string(m));
      ExpectSoundProgram(BuildNaive({.pp = p, .microbatches = m}), p, 1, m, false);
    }
  }
}

TEST(NaiveTest, EachRankAlternatesForwardAndBackwardOfOneMicrobatch) {
  const Program program = BuildNaive({.pp = 3, .microbatches = 4});
  for (int r = 0; r < 3; ++r) {
    ASSERT_EQ(program.ranks[r].size(), 8u);
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(program.ranks[r][2 * i], (Action{Op::kForward, r, i}));
      EXPECT_EQ(program.ranks[r][2 * i + 1], (Action{Op::kBackward, r, i}));
    }
  }
}

TEST(NaiveTest, HoldsOneMicrobatchAtATime) {
  EXPECT_EQ(PeakInFlight(BuildNaive({.pp = 4, .microbatches = 9})), std::vector<int>(4, 1));
}

TEST(NaiveTest, Preconditions) { ExpectSingleChunkPreconditions(BuildNaive, "naive"); }

}  // namespace
}  // namespace conveyor
