#include "conveyor/profile/timed_transport.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "conveyor/comm/local_transport.h"
#include "conveyor/comm/rank_threads.h"

namespace conveyor {
namespace {

TEST(TimedTransportTest, RecordsEveryCollectiveAndForwardsItsResult) {
  const auto world = LocalWorld(2);
  std::vector<std::vector<CollectiveSpan>> spans(2);
  std::vector<double> sums(2), parts(2), gathered(2);
  RunRankThreads(world, [&](int r) {
    TimedTransport timed(world[r].get());
    EXPECT_EQ(timed.rank(), r);
    EXPECT_EQ(timed.world_size(), 2);
    std::vector<at::Tensor> tensors = {at::full({4}, r + 1.0, at::kFloat)};  // 16 bytes
    timed.AllReduceSum(tensors);
    sums[r] = tensors[0][0].item<double>();
    const at::Tensor part = timed.ReduceScatterSum(at::arange(6, at::kDouble), {2, 4});
    parts[r] = part.sum().item<double>();
    gathered[r] = timed.AllGather(at::full({1}, 10.0 * r, at::kDouble))[1].item<double>();
    timed.Barrier();
    // Point-to-point goes through untimed.
    if (r == 0) timed.Send(at::ones({3}), 1, 7)->Wait();
    if (r == 1) timed.Recv(at::empty({3}), 0, 7)->Wait();
    spans[r] = timed.TakeSpans();
    EXPECT_TRUE(timed.TakeSpans().empty());  // taken
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(sums[r], 3);
    EXPECT_EQ(parts[r], r == 0 ? 2 * (0 + 1) : 2 * (2 + 3 + 4 + 5));
    EXPECT_EQ(gathered[r], 10);
    ASSERT_EQ(spans[r].size(), 4u);
    EXPECT_EQ(spans[r][0].name, "all-reduce");
    EXPECT_EQ(spans[r][0].bytes, 16);
    EXPECT_EQ(spans[r][1].name, "reduce-scatter");
    EXPECT_EQ(spans[r][1].bytes, 48);
    EXPECT_EQ(spans[r][2].name, "all-gather");
    EXPECT_EQ(spans[r][3].name, "barrier");
    for (size_t i = 0; i < spans[r].size(); ++i) {
      EXPECT_LE(spans[r][i].start, spans[r][i].end);
      if (i > 0) EXPECT_GE(spans[r][i].start, spans[r][i - 1].end);
    }
    EXPECT_NEAR(TotalSeconds(spans[r]),
                (spans[r][0].end - spans[r][0].start) + (spans[r][1].end - spans[r][1].start) +
                    (spans[r][2].end - spans[r][2].start) + (spans[r][3].end - spans[r][3].start),
                1e-12);
  }
}

}  // namespace
}  // namespace conveyor
