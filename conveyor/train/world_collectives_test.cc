#include "conveyor/train/world_collectives.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <vector>

#include "conveyor/comm/local_transport.h"
#include "conveyor/comm/rank_threads.h"

namespace conveyor {
namespace {

TEST(SumOverRanksTest, SumsEveryRanksTensor) {
  const auto world = LocalWorld(3);
  std::vector<at::Tensor> sums(3);
  RunRankThreads(world, [&](int r) {
    sums[r] = SumOverRanks(world[r].get(), at::tensor({1.0 * r, 10.0 * (r + 1)}, at::kDouble));
  });
  for (const at::Tensor& sum : sums) {
    EXPECT_TRUE(at::equal(sum, at::tensor({3.0, 60.0}, at::kDouble))) << sum;
  }
}

TEST(SumOverRanksTest, OneRankGetsItsOwnTensor) {
  const at::Tensor t = at::tensor({2.5}, at::kDouble);
  EXPECT_TRUE(SumOverRanks(nullptr, t).is_same(t));
  const auto world = LocalWorld(1);
  EXPECT_TRUE(SumOverRanks(world[0].get(), t).is_same(t));
}

}  // namespace
}  // namespace conveyor
