#include "conveyor/comm/all_to_all_testing.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

namespace conveyor {

int64_t AllToAllRows(int from, int to) { return (from + 2 * to) % 3; }

at::Tensor AllToAllInput(int from, int ranks) {
  std::vector<at::Tensor> parts;
  for (int to = 0; to < ranks; ++to) {
    const at::Tensor j = at::arange(AllToAllRows(from, to), at::kDouble) + 1000 * from + 100 * to;
    parts.push_back(at::stack({j, -j}, 1));  // (rows, 2)
  }
  return at::cat(parts, 0).t().contiguous().t();  // the same values, column-major
}

void ExpectAllToAllDelivers(Transport& t) {
  const int n = t.world_size(), me = t.rank();
  std::vector<int64_t> send, recv;
  for (int r = 0; r < n; ++r) {
    send.push_back(AllToAllRows(me, r));
    recv.push_back(AllToAllRows(r, me));
  }
  const at::Tensor input = AllToAllInput(me, n);
  const at::Tensor before = input.clone();
  const at::Tensor got = t.AllToAll(input, send, recv);
  std::vector<at::Tensor> want;
  for (int r = 0; r < n; ++r) {
    const at::Tensor j = at::arange(AllToAllRows(r, me), at::kDouble) + 1000 * r + 100 * me;
    want.push_back(at::stack({j, -j}, 1));
  }
  EXPECT_TRUE(got.is_contiguous());
  EXPECT_TRUE(got.equal(at::cat(want, 0))) << "rank " << me << " got " << got;
  EXPECT_TRUE(input.equal(before)) << "the input was modified";
  // Nothing to send to anyone: a (0, 3) result.
  const at::Tensor none =
      t.AllToAll(at::zeros({0, 3}), std::vector<int64_t>(n, 0), std::vector<int64_t>(n, 0));
  EXPECT_EQ(none.sizes(), (std::vector<int64_t>{0, 3}));
}

}  // namespace conveyor
