#include "conveyor/schedule/builders/interleaved_1f1b.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "conveyor/schedule/activation_memory.h"
#include "conveyor/schedule/builders/builder_testing.h"
#include "conveyor/schedule/builders/builder_util.h"
#include "conveyor/schedule/verify.h"

namespace conveyor {
namespace {

std::string Trace(int p, int v, int m) {
  return "p=" + std::to_string(p) + " v=" + std::to_string(v) + " m=" + std::to_string(m);
}

// Every m, also those Megatron-LM and PyTorch refuse (m < p, p not dividing m).
TEST(Interleaved1F1BTest, SoundOverGrid) {
  for (int p = 1; p <= 8; ++p) {
    for (int v = 2; v <= 4; ++v) {
      for (int m = 1; m <= 3 * p + 1; ++m) {
        SCOPED_TRACE(Trace(p, v, m));
        ExpectSoundProgram(BuildInterleaved1F1B({.pp = p, .microbatches = m, .chunks = v}), p, v, m,
                           false);
      }
    }
  }
}

TEST(Interleaved1F1BTest, DefaultsToTwoChunks) {
  const Program program = BuildInterleaved1F1B({.pp = 4, .microbatches = 8});
  EXPECT_EQ(program.layout.chunks_per_rank(), 2);
  EXPECT_EQ(program.layout.placement(), Placement::kLoop);
}

// With p dividing m: Megatron-LM's order. The k-th forward of rank r is chunk (k / p) % v of
// micro-batch (k / (p v)) p + k % p; backwards walk the chunks the other way; warm-up is
// 2(p - r - 1) + (v - 1) p forwards, then F and B alternate.
TEST(Interleaved1F1BTest, MatchesMegatronWhenRanksDivideMicrobatches) {
  for (int p = 1; p <= 6; ++p) {
    for (int v = 2; v <= 4; ++v) {
      for (int m = p; m <= 3 * p; m += p) {
        const Program program = BuildInterleaved1F1B({.pp = p, .microbatches = m, .chunks = v});
        for (int r = 0; r < p; ++r) {
          SCOPED_TRACE(Trace(p, v, m) + " r=" + std::to_string(r));
          const std::vector<Action>& actions = program.ranks[r];
          const std::vector<Action> forwards = OnlyOp(actions, Op::kForward);
          const std::vector<Action> backwards = OnlyOp(actions, Op::kBackward);
          for (int k = 0; k < v * m; ++k) {
            const int chunk = (k / p) % v, mb = (k / (p * v)) * p + k % p;
            EXPECT_EQ(forwards[k], (Action{Op::kForward, chunk * p + r, mb}));
            EXPECT_EQ(backwards[k], (Action{Op::kBackward, (v - 1 - chunk) * p + r, mb}));
          }
          const int warmup = std::min(2 * (p - r - 1) + (v - 1) * p, v * m);
          EXPECT_EQ(LeadingForwards(actions), std::min(warmup + 1, v * m));
          for (int k = 0; warmup + k < v * m; ++k) {
            EXPECT_EQ(actions[warmup + 2 * k].op, Op::kForward);
            EXPECT_EQ(actions[warmup + 2 * k + 1].op, Op::kBackward);
          }
        }
      }
    }
  }
}

TEST(Interleaved1F1BTest, GroupsForUnevenMicrobatchCounts) {
  EXPECT_EQ(GroupSizes(8, 4), (std::vector<int>{4, 4}));
  EXPECT_EQ(GroupSizes(10, 4), (std::vector<int>{5, 5}));
  EXPECT_EQ(GroupSizes(11, 4), (std::vector<int>{6, 5}));
  EXPECT_EQ(GroupSizes(7, 4), (std::vector<int>{7}));
  EXPECT_EQ(GroupSizes(3, 4), (std::vector<int>{3}));
  for (int p = 1; p <= 8; ++p) {
    for (int m = 1; m <= 5 * p; ++m) {
      const std::vector<int> sizes = GroupSizes(m, p);
      int total = 0;
      for (size_t g = 0; g < sizes.size(); ++g) {
        total += sizes[g];
        if (m >= p) {
          EXPECT_GE(sizes[g], p) << "p=" << p << " m=" << m;
          EXPECT_LT(sizes[g], 2 * p) << "p=" << p << " m=" << m;
        }
        if (g > 0) {
          EXPECT_LE(sizes[g], sizes[g - 1]);
          EXPECT_GE(sizes[g], sizes[0] - 1);
        }
      }
      EXPECT_EQ(total, m);
    }
  }
}

// m = 10 on 4 ranks: groups of 5; rank r warms up with 2(3 - r) + (v - 1) 5 forwards and
// the first group runs chunk by chunk before the second starts.
TEST(Interleaved1F1BTest, UnevenGroupsOrderAndWarmup) {
  const int p = 4, v = 2, m = 10;
  const Program program = BuildInterleaved1F1B({.pp = p, .microbatches = m, .chunks = v});
  for (int r = 0; r < p; ++r) {
    EXPECT_EQ(LeadingForwards(program.ranks[r]), 2 * (p - r - 1) + 5 + 1) << "r=" << r;
  }
  const std::vector<Action> forwards = OnlyOp(program.ranks[1], Op::kForward);
  std::vector<Action> expected;
  for (int group_start : {0, 5}) {
    for (int stage : {1, 5}) {
      for (int mb = group_start; mb < group_start + 5; ++mb) {
        expected.push_back(Action{Op::kForward, stage, mb});
      }
    }
  }
  EXPECT_EQ(forwards, expected);
}

// Rank 0 holds its warm-up plus one (the steady forward) at its peak; fewer micro-batches
// than that: all v m.
TEST(Interleaved1F1BTest, PeakInFlightOnRankZero) {
  for (int p = 1; p <= 8; ++p) {
    for (int v = 2; v <= 4; ++v) {
      for (int m = 1; m <= 3 * p + 1; ++m) {
        const int g0 = GroupSizes(m, p)[0];
        const std::vector<int> peaks =
            PeakInFlight(BuildInterleaved1F1B({.pp = p, .microbatches = m, .chunks = v}));
        EXPECT_EQ(peaks[0], std::min(v * m, 2 * (p - 1) + (v - 1) * g0 + 1)) << Trace(p, v, m);
        EXPECT_EQ(*std::max_element(peaks.begin(), peaks.end()), peaks[0]) << Trace(p, v, m);
      }
    }
  }
}

TEST(Interleaved1F1BTest, Preconditions) {
  ExpectRejected(BuildInterleaved1F1B, {.pp = 0, .microbatches = 4}, "pp = 0");
  ExpectRejected(BuildInterleaved1F1B, {.pp = 4, .microbatches = 0}, "microbatches = 0");
  ExpectRejected(BuildInterleaved1F1B, {.pp = 4, .microbatches = -3}, "microbatches = -3");
  ExpectRejected(BuildInterleaved1F1B, {.pp = 4, .microbatches = 4, .chunks = 1}, "chunks = 1");
  ExpectRejected(BuildInterleaved1F1B, {.pp = 4, .microbatches = 4, .chunks = -2}, "chunks = -2");
  ExpectRejected(BuildInterleaved1F1B, {.pp = 4, .microbatches = 4, .chunks = 1},
                 "interleaved-1f1b");
}

}  // namespace
}  // namespace conveyor
