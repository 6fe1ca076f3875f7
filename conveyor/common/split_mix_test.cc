#include "conveyor/common/split_mix.h"

#include <gtest/gtest.h>

namespace conveyor {
namespace {

TEST(SplitMixTest, SplitMix64MatchesReferenceSequence) {
  // The reference generator's first outputs from state 0 (state += gamma, then mix).
  EXPECT_EQ(SplitMix64(0), 0xe220a8397b1dcdafULL);
  EXPECT_EQ(SplitMix64(kSplitMixGamma), 0x6e789e6aa1b965f4ULL);
}

TEST(SplitMixTest, SplitMix64IsTheFinalizerOfTheAdvancedState) {
  EXPECT_EQ(SplitMixFinalize(kSplitMixGamma), SplitMix64(0));
  EXPECT_EQ(SplitMixFinalize(0), 0u);  // the mix fixes zero: callers offset their inputs
  EXPECT_NE(SplitMixFinalize(1), SplitMixFinalize(2));
}

}  // namespace
}  // namespace conveyor
