#include "conveyor/partition/partition.h"

#include <gtest/gtest.h>

#include <random>

#include "conveyor/common/error.h"

namespace conveyor {
namespace {

std::vector<int> Sizes(const std::vector<LayerRange>& ranges) {
  std::vector<int> sizes;
  for (const LayerRange& r : ranges) sizes.push_back(r.size());
  return sizes;
}

// Smallest max load over every split, by brute force.
double BruteForce(const std::vector<double>& costs, int stages, int start = 0) {
  const int n = static_cast<int>(costs.size());
  if (stages == 1) {
    double sum = 0;
    for (int i = start; i < n; ++i) sum += costs[i];
    return sum;
  }
  double best = 1e300, head = 0;
  for (int end = start + 1; end <= n - (stages - 1); ++end) {
    head += costs[end - 1];
    best = std::min(best, std::max(head, BruteForce(costs, stages - 1, end)));
  }
  return best;
}

TEST(PartitionTest, EvenSplitLargerFirst) {
  EXPECT_EQ(Sizes(PartitionEvenly(10, 4)), (std::vector<int>{3, 3, 2, 2}));
  EXPECT_EQ(Sizes(PartitionEvenly(4, 4)), (std::vector<int>{1, 1, 1, 1}));
}

TEST(PartitionTest, SizesGivenAreKeptAndCheckedAgainstTheModel) {
  const std::vector<LayerRange> r = PartitionBySizes({1, 3, 2}, 6, 3, "--stage-layers");
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[1].begin, 1);
  EXPECT_EQ(r[1].end, 4);
  EXPECT_EQ(r[2].end, 6);
  try {
    PartitionBySizes({2, 3}, 6, 2, "--stage-layers");
    ADD_FAILURE() << "5 layers of 6 were accepted";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("--stage-layers 2,3 gives 2 stages 5 layers"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(PartitionBySizes({3, 3}, 6, 3, "--stage-layers"), UserError);
  EXPECT_THROW(PartitionBySizes({0, 6}, 6, 2, "--stage-layers"), UserError);
}

TEST(PartitionTest, HeavyEndsGetFewerLayers) {
  // Embedding and head cost like three blocks each.
  const std::vector<double> costs = {3, 1, 1, 1, 1, 1, 1, 3};
  const auto ranges = Partition(costs, 4);
  EXPECT_EQ(Sizes(ranges), (std::vector<int>{1, 3, 3, 1}));
  EXPECT_DOUBLE_EQ(MaxLoad(costs, ranges), 3);
}

TEST(PartitionTest, OptimalOnRandomCosts) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> cost(0, 10);
  for (int trial = 0; trial < 50; ++trial) {
    const int n = 1 + trial % 9;
    std::vector<double> costs(n);
    for (double& c : costs) c = cost(rng);
    for (int k = 1; k <= n; ++k) {
      const auto ranges = Partition(costs, k);
      ASSERT_EQ(static_cast<int>(ranges.size()), k);
      EXPECT_EQ(ranges.front().begin, 0);
      EXPECT_EQ(ranges.back().end, n);
      for (int s = 0; s < k; ++s) {
        EXPECT_GE(ranges[s].size(), 1);
        if (s > 0) {
          EXPECT_EQ(ranges[s].begin, ranges[s - 1].end);
        }
      }
      EXPECT_NEAR(MaxLoad(costs, ranges), BruteForce(costs, k), 1e-9);
    }
  }
}

TEST(PartitionTest, ImpossibleRequestsNameTheValues) {
  try {
    PartitionEvenly(6, 8);
    FAIL();
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot split 6 layers into 8 stages"), std::string::npos);
  }
  EXPECT_THROW(Partition({1, 2}, 0), UserError);
  EXPECT_THROW(Partition({1, -2}, 1), UserError);
}

}  // namespace
}  // namespace conveyor
