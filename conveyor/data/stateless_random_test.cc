#include "conveyor/data/stateless_random.h"

#include <gtest/gtest.h>

#include <vector>

namespace conveyor {
namespace {

TEST(StatelessRandomTest, HashIsPureAndOrderSensitive) {
  EXPECT_EQ(HashOf({7, 1, 2}), HashOf({7, 1, 2}));
  EXPECT_NE(HashOf({7, 1, 2}), HashOf({7, 2, 1}));
  EXPECT_NE(HashOf({7, 1, 2}), HashOf({8, 1, 2}));
  EXPECT_NE(HashOf({0}), HashOf({0, 0}));
}

TEST(StatelessRandomTest, UniformIndexCoversRangeEvenly) {
  std::vector<int> counts(10, 0);
  for (uint64_t i = 0; i < 10000; ++i) {
    const uint64_t k = UniformIndex(HashOf({3, i}), 10);
    ASSERT_LT(k, 10u);
    ++counts[k];
  }
  for (int count : counts) {
    EXPECT_GT(count, 850);
    EXPECT_LT(count, 1150);
  }
  EXPECT_EQ(UniformIndex(~0ULL, 1), 0u);
}

TEST(StatelessRandomTest, UniformUnitInHalfOpenInterval) {
  EXPECT_EQ(UniformUnit(0), 0.0);
  EXPECT_LT(UniformUnit(~0ULL), 1.0);
  double sum = 0;
  for (uint64_t i = 0; i < 10000; ++i) sum += UniformUnit(HashOf({i}));
  EXPECT_NEAR(sum / 10000, 0.5, 0.02);
}

// Every n gets a bijection; keys give different orders; the same (index, n, key) the same
// position.
TEST(StatelessRandomTest, PermutedIndexIsABijectionChosenByTheKey) {
  for (const uint64_t n : {1, 2, 3, 7, 64, 1000, 4097}) {
    std::vector<bool> seen(n, false);
    for (uint64_t i = 0; i < n; ++i) {
      const uint64_t p = PermutedIndex(i, n, 42);
      ASSERT_LT(p, n);
      EXPECT_FALSE(seen[p]) << "n " << n << ": " << p << " twice";
      seen[p] = true;
      EXPECT_EQ(PermutedIndex(i, n, 42), p);
    }
  }
  int moved = 0, differ = 0;
  for (uint64_t i = 0; i < 1000; ++i) {
    moved += PermutedIndex(i, 1000, 1) != i;
    differ += PermutedIndex(i, 1000, 1) != PermutedIndex(i, 1000, 2);
  }
  EXPECT_GT(moved, 900);
  EXPECT_GT(differ, 900);
}

}  // namespace
}  // namespace conveyor
