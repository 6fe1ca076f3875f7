#include "conveyor/schedule/builders/looped_bfs.h"

#include <gtest/gtest.h>

#include "conveyor/schedule/activation_memory.h"
#include "conveyor/schedule/builders/builder_testing.h"
#include "conveyor/schedule/builders/gpipe.h"
#include "conveyor/schedule/verify.h"

namespace conveyor {
namespace {

TEST(LoopedBfsTest, SoundOverGrid) {
  for (int p = 1; p <= 8; ++p) {
    for (int v = 1; v <= 4; ++v) {
      for (int m = 1; m <= 3 * p + 1; ++m) {
        SCOPED_TRACE("p=" + std::to_string(p) + " v=" + std::to_string(v) +
                     " m=" + std::to_string(m));
        ExpectSoundProgram(BuildLoopedBfs({.pp = p, .microbatches = m, .chunks = v}), p, v, m,
                           false);
      }
    }
  }
}

// Forwards stage by stage (lowest first), every micro-batch of a stage before the next
// stage; backwards in exactly the reverse order.
TEST(LoopedBfsTest, BreadthFirstForwardsThenReversedBackwards) {
  const int p = 3, v = 3, m = 4;
  const Program program = BuildLoopedBfs({.pp = p, .microbatches = m, .chunks = v});
  for (int r = 0; r < p; ++r) {
    const std::vector<Action>& actions = program.ranks[r];
    ASSERT_EQ(actions.size(), 2u * v * m);
    for (int k = 0; k < v * m; ++k) {
      const Action forward{Op::kForward, (k / m) * p + r, k % m};
      EXPECT_EQ(actions[k], forward) << "r=" << r << " k=" << k;
      EXPECT_EQ(actions[2 * v * m - 1 - k], (Action{Op::kBackward, forward.stage, k % m}));
    }
  }
}

TEST(LoopedBfsTest, DefaultsToTwoChunksAndOneChunkHasGpipesPasses) {
  EXPECT_EQ(BuildLoopedBfs({.pp = 4, .microbatches = 8}).layout.chunks_per_rank(), 2);
  const Program one = BuildLoopedBfs({.pp = 3, .microbatches = 5, .chunks = 1});
  const Program gpipe = BuildGpipe({.pp = 3, .microbatches = 5});
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(OnlyOp(one.ranks[r], Op::kForward), OnlyOp(gpipe.ranks[r], Op::kForward));
  }
}

TEST(LoopedBfsTest, EveryRankHoldsAllItsActivations) {
  for (int p = 1; p <= 6; ++p) {
    for (int v = 1; v <= 4; ++v) {
      for (int m = 1; m <= 2 * p + 1; ++m) {
        EXPECT_EQ(PeakInFlight(BuildLoopedBfs({.pp = p, .microbatches = m, .chunks = v})),
                  std::vector<int>(p, v * m));
      }
    }
  }
}

TEST(LoopedBfsTest, Preconditions) {
  ExpectRejected(BuildLoopedBfs, {.pp = 0, .microbatches = 4}, "pp = 0");
  ExpectRejected(BuildLoopedBfs, {.pp = 2, .microbatches = 0}, "microbatches = 0");
  ExpectRejected(BuildLoopedBfs, {.pp = 2, .microbatches = 4, .chunks = -1}, "chunks = -1");
  ExpectRejected(BuildLoopedBfs, {.pp = 2, .microbatches = 4, .chunks = -1}, "looped-bfs");
}

}  // namespace
}  // namespace conveyor
