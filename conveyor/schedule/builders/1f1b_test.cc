#include "conveyor/schedule/builders/1f1b.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "conveyor/schedule/activation_memory.h"
#include "conveyor/schedule/builders/builder_testing.h"
#include "conveyor/schedule/verify.h"

namespace conveyor {
namespace {

TEST(Build1F1BTest, SoundOverGrid) {
  for (int p = 1; p <= 8; ++p) {
    for (int m = 1; m <= 3 * p + 1; ++m) {
      SCOPED_TRACE("p=" + std::to_string(p) + " m=" + std::to_string(m));
      ExpectSoundProgram(Build1F1B({.pp = p, .microbatches = m}), p, 1, m, false);
    }
  }
}

// Warm-up of min(p - r - 1, m) forwards, then strict F, B alternation while forwards
// remain (the first action after warm-up is the steady forward, the next a backward), then
// only backwards; micro-batches ascending in both directions.
TEST(Build1F1BTest, WarmupSteadyCooldownPerRank) {
  for (int p = 1; p <= 8; ++p) {
    for (int m = 1; m <= 3 * p + 1; ++m) {
      const Program program = Build1F1B({.pp = p, .microbatches = m});
      for (int r = 0; r < p; ++r) {
        SCOPED_TRACE("p=" + std::to_string(p) + " m=" + std::to_string(m) +
                     " r=" + std::to_string(r));
        const std::vector<Action>& actions = program.ranks[r];
        const int warmup = std::min(p - r - 1, m);
        EXPECT_EQ(LeadingForwards(actions), std::min(warmup + 1, m));
        if (warmup < m) {
          EXPECT_EQ(actions[warmup + 1], (Action{Op::kBackward, r, 0}));
        }
        const int steady = m - warmup;
        for (int k = 0; k < steady; ++k) {
          EXPECT_EQ(actions[warmup + 2 * k], (Action{Op::kForward, r, warmup + k}));
          EXPECT_EQ(actions[warmup + 2 * k + 1], (Action{Op::kBackward, r, k}));
        }
        for (int k = steady; k < m; ++k) {
          EXPECT_EQ(actions[m + k], (Action{Op::kBackward, r, k}));
        }
      }
    }
  }
}

TEST(Build1F1BTest, PeakInFlightIsMinOfRemainingRanksAndMicrobatches) {
  for (int p = 1; p <= 8; ++p) {
    for (int m = 1; m <= 3 * p + 1; ++m) {
      const std::vector<int> peaks = PeakInFlight(Build1F1B({.pp = p, .microbatches = m}));
      EXPECT_EQ(peaks[0], std::min(p, m)) << "p=" << p << " m=" << m;
      for (int r = 0; r < p; ++r) EXPECT_EQ(peaks[r], std::min(p - r, m)) << "r=" << r;
    }
  }
}

TEST(Build1F1BTest, FewerMicrobatchesThanRanksIsScheduled) {
  // PyTorch refuses m < p; here rank 0 runs GPipe-like and the last rank alternates.
  const Program program = Build1F1B({.pp = 4, .microbatches = 2});
  EXPECT_EQ(program.ToText(),
            "rank 0: 0F0 0F1 0B0 0B1\n"
            "rank 1: 1F0 1F1 1B0 1B1\n"
            "rank 2: 2F0 2F1 2B0 2B1\n"
            "rank 3: 3F0 3B0 3F1 3B1\n");
}

TEST(Build1F1BTest, Preconditions) { ExpectSingleChunkPreconditions(Build1F1B, "1f1b"); }

}  // namespace
}  // namespace conveyor
