#include "conveyor/train/pipeline_gradients.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>

#include "conveyor/comm/local_transport.h"
#include "conveyor/comm/rank_threads.h"

namespace conveyor {
namespace {

TEST(PipelineGradientsTest, SharedNamesAreThoseWithTwoCopiesOrMore) {
  EXPECT_EQ(PipelineGradients::SharedNames({{"a", {0}}, {"tied", {0, 3}}, {"twice", {1, 1}}}),
            (std::set<std::string>{"tied", "twice"}));
}

// Finite gradients whose norm passes fp32's range (a huge loss scale) keep a finite norm;
// a gradient that is not finite gives a norm that is not.
TEST(PipelineGradientsTest, ANormPastFp32sRangeIsFiniteAndAnInfiniteGradientIsNot) {
  PipelineGradients one_process(nullptr, {{"w", {0}}, {"b", {0}}});
  NamedTensors params = {{"w", at::zeros({10, 10})}, {"b", at::zeros({3})}};
  params[0].second.mutable_grad() = at::full({10, 10}, 1e38);  // norm 1e39
  params[1].second.mutable_grad() = at::ones({3});
  EXPECT_NEAR(one_process.GlobalNorm(params), 1e39, 1e33);
  params[1].second.mutable_grad()[1] = std::numeric_limits<float>::infinity();
  EXPECT_TRUE(std::isinf(one_process.GlobalNorm(params)));
}

// Two DP replicas of one pipeline rank under ZeRO-1: "w" (6 elements) is scattered, each
// replica holding the summed gradient only in its range ([0, 4) and [4, 7) of the 7 flat
// elements) and garbage elsewhere; "tied" (1 element at flat 6, two holders: shared) is whole.
// The norm counts each element of the summed gradient once, like one process's.
TEST(PipelineGradientsTest, ZeroNormCountsEachReplicasRangeOnce) {
  const at::Tensor summed_w = at::arange(1, 7, at::kFloat).view({2, 3});
  const at::Tensor summed_tied = at::full({1}, 2.0);
  const std::map<std::string, std::vector<int>> holders = {{"w", {0}}, {"tied", {0, 0}}};
  PipelineGradients one_process(nullptr, holders);
  NamedTensors whole = {{"w", at::zeros({2, 3})}, {"tied", at::zeros({1})}};
  whole[0].second.mutable_grad() = summed_w.clone();
  whole[1].second.mutable_grad() = summed_tied.clone();
  const double want = one_process.GlobalNorm(whole);
  // Each tensor's norm is taken in its dtype (float) by the multi-tensor kernel.
  EXPECT_NEAR(want, std::sqrt(91.0 + 4.0), 1e-6 * want);

  auto dp = LocalWorld(2);
  std::vector<double> got(2);
  RunRankThreads(dp, [&](int r) {
    NamedTensors params = {{"w", at::zeros({2, 3})}, {"tied", at::zeros({1})}};
    auto layout =
        std::make_shared<const ShardLayout>(params, 2, r, PipelineGradients::SharedNames(holders));
    const auto [begin, end] = layout->range(r);
    at::Tensor w = at::full({6}, 100.0);  // unsummed outside the range
    w.narrow(0, begin, std::min<int64_t>(end, 6) - begin)
        .copy_(summed_w.view({-1}).narrow(0, begin, std::min<int64_t>(end, 6) - begin));
    params[0].second.mutable_grad() = w.view({2, 3});
    params[1].second.mutable_grad() = summed_tied.clone();
    PipelineGradients sync(nullptr, holders, {}, {}, dp[r].get(), layout);
    got[r] = sync.GlobalNorm(params);
  });
  EXPECT_NEAR(got[0], want, 1e-6 * want);
  EXPECT_NEAR(got[1], want, 1e-6 * want);
}

}  // namespace
}  // namespace conveyor
