#include "conveyor/schedule/builders/zb_h1.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "conveyor/schedule/activation_memory.h"
#include "conveyor/schedule/builders/1f1b.h"
#include "conveyor/schedule/builders/builder_testing.h"
#include "conveyor/schedule/verify.h"

namespace conveyor {
namespace {

std::string Trace(int p, int m) { return "p=" + std::to_string(p) + " m=" + std::to_string(m); }

TEST(ZbH1Test, SoundOverGrid) {
  for (int p = 1; p <= 8; ++p) {
    for (int m = 1; m <= 3 * p + 1; ++m) {
      SCOPED_TRACE(Trace(p, m));
      ExpectSoundProgram(BuildZbH1({.pp = p, .microbatches = m}), p, 1, m, true);
    }
  }
}

// Without its W passes, rank r's list is 1F1B's with each B replaced by I.
TEST(ZbH1Test, ForwardsAndInputPassesFollowOneFOneB) {
  for (int p = 1; p <= 8; ++p) {
    for (int m = 1; m <= 3 * p + 1; ++m) {
      const Program zb = BuildZbH1({.pp = p, .microbatches = m});
      const Program one_f_one_b = Build1F1B({.pp = p, .microbatches = m});
      for (int r = 0; r < p; ++r) {
        std::vector<Action> expected = one_f_one_b.ranks[r];
        for (Action& a : expected) {
          if (a.op == Op::kBackward) a.op = Op::kBackwardInput;
        }
        std::vector<Action> got;
        for (const Action& a : zb.ranks[r]) {
          if (a.op != Op::kBackwardWeight) got.push_back(a);
        }
        EXPECT_EQ(got, expected) << Trace(p, m) << " r=" << r;
      }
    }
  }
}

// Rank r runs W of micro-batch k - r right after its k-th I; the last r W close the list.
TEST(ZbH1Test, WeightPassesLagByRank) {
  for (int p = 1; p <= 8; ++p) {
    for (int m = 1; m <= 3 * p + 1; ++m) {
      const Program zb = BuildZbH1({.pp = p, .microbatches = m});
      for (int r = 0; r < p; ++r) {
        SCOPED_TRACE(Trace(p, m) + " r=" + std::to_string(r));
        const std::vector<Action>& actions = zb.ranks[r];
        int inputs_seen = 0;
        for (size_t k = 0; k < actions.size(); ++k) {
          if (actions[k].op != Op::kBackwardInput) continue;
          const int due = inputs_seen++ - r;
          if (due < 0) continue;
          ASSERT_LT(k + 1, actions.size());
          EXPECT_EQ(actions[k + 1], (Action{Op::kBackwardWeight, r, due}));
        }
        const std::vector<Action> weights = OnlyOp(actions, Op::kBackwardWeight);
        const int tail = std::min(r, m);
        for (int j = 0; j < tail; ++j) {
          EXPECT_EQ(actions[actions.size() - tail + j],
                    (Action{Op::kBackwardWeight, r, m - tail + j}));
        }
        ASSERT_EQ(weights.size(), static_cast<size_t>(m));
      }
    }
  }
}

TEST(ZbH1Test, RankZeroIsOneFOneBWithSplitBackward) {
  EXPECT_EQ(BuildZbH1({.pp = 3, .microbatches = 4}).ToText(),
            "rank 0: 0F0 0F1 0F2 0I0 0W0 0F3 0I1 0W1 0I2 0W2 0I3 0W3\n"
            "rank 1: 1F0 1F1 1I0 1F2 1I1 1W0 1F3 1I2 1W1 1I3 1W2 1W3\n"
            "rank 2: 2F0 2I0 2F1 2I1 2F2 2I2 2W0 2F3 2I3 2W1 2W2 2W3\n");
}

// Counting a micro-batch from its F until its W, no rank holds more than 1F1B's peak.
TEST(ZbH1Test, PeakInFlightNoHigherThanOneFOneB) {
  for (int p = 1; p <= 8; ++p) {
    for (int m = 1; m <= 3 * p + 1; ++m) {
      const std::vector<int> zb = PeakInFlight(BuildZbH1({.pp = p, .microbatches = m}));
      const std::vector<int> base = PeakInFlight(Build1F1B({.pp = p, .microbatches = m}));
      const int base_peak = *std::max_element(base.begin(), base.end());
      EXPECT_EQ(base_peak, std::min(p, m)) << Trace(p, m);
      EXPECT_LE(*std::max_element(zb.begin(), zb.end()), base_peak) << Trace(p, m);
      EXPECT_EQ(zb[0], base[0]) << Trace(p, m);
    }
  }
}

TEST(ZbH1Test, Preconditions) { ExpectSingleChunkPreconditions(BuildZbH1, "zb-h1"); }

}  // namespace
}  // namespace conveyor
