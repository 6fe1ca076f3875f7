#include "conveyor/nn/all_to_all.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "conveyor/comm/all_to_all_testing.h"
#include "conveyor/comm/local_transport.h"
#include "conveyor/comm/rank_threads.h"

namespace conveyor {
namespace {

// y = the rows the others sent, loss = sum(y^2): dloss/dy = 2 y, which the backward's reverse
// exchange brings home to the rows' senders, so every rank's x.grad is 2 x, row by row.
TEST(ExchangeRowsTest, EachRowsGradientReturnsToTheRankThatSentIt) {
  for (int ranks : {1, 3}) {
    auto world = LocalWorld(ranks);
    RunRankThreads(world, [&](int me) {
      std::vector<int64_t> send, recv;
      for (int r = 0; r < ranks; ++r) {
        send.push_back(AllToAllRows(me, r));
        recv.push_back(AllToAllRows(r, me));
      }
      const at::Tensor x = AllToAllInput(me, ranks).clone().requires_grad_(true);
      const at::Tensor y = ExchangeRows(x, {world[me].get()}, send, recv);
      EXPECT_TRUE(y.detach().equal(world[me]->AllToAll(x.detach(), send, recv)));
      (y * y).sum().backward();
      ASSERT_TRUE(x.grad().defined());
      EXPECT_TRUE(x.grad().equal(2 * x.detach())) << "rank " << me << ": " << x.grad();
    });
  }
}

}  // namespace
}  // namespace conveyor
