#include "conveyor/nn/weight_cast.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

#include <optional>
#include <vector>

#include "conveyor/device/compute_precision.h"
#include "conveyor/nn/linear.h"

namespace conveyor {
namespace {

// Three micro-batches' forward and backward of y = Linear(x, w) under bf16 autocast, an
// in-place update of w between the second and the third (as an optimizer's); the outputs and
// w's summed gradient, with a WeightCastCache alive or not. Without one every product casts
// afresh: the reference (a stale copy served after the update would change the third output).
struct CastRun {
  std::vector<at::Tensor> outputs;
  at::Tensor grad;
  int64_t casts = 0, reused = 0;
};
CastRun ThreeMicroBatches(bool cached) {
  at::manual_seed(3);
  at::Tensor w = at::randn({6, 8}).requires_grad_(true);
  std::optional<WeightCastCache> cache;
  if (cached) cache.emplace();
  const int64_t casts = WeightCastCache::casts(), reused = WeightCastCache::reused();
  CastRun run;
  for (int mb = 0; mb < 3; ++mb) {
    if (mb == 2) {
      at::NoGradGuard no_grad;
      w.mul_(0.5).add_(1);  // the cast made before must not serve again
    }
    const at::Tensor x = at::randn({4, 8});
    at::Tensor y;
    {
      const ComputePrecisionGuard bf16(c10::DeviceType::CPU, at::kBFloat16, true);
      y = Linear(x, w, {});
    }
    run.outputs.push_back(y.detach().clone());
    torch::autograd::backward({y.to(at::kFloat).square().sum()});
  }
  run.grad = w.grad().clone();
  run.casts = WeightCastCache::casts() - casts;
  run.reused = WeightCastCache::reused() - reused;
  return run;
}

TEST(WeightCastTest, TheCacheCastsOnceAChangeAndGivesWhatFreshCastsGive) {
  const CastRun fresh = ThreeMicroBatches(false);
  const CastRun cached = ThreeMicroBatches(true);
  // A forward and a backward a micro-batch: six casts without the cache; with it one before
  // the update and one after, the other four served from it.
  EXPECT_EQ(fresh.casts, 6);
  EXPECT_EQ(fresh.reused, 0);
  EXPECT_EQ(cached.casts, 2);
  EXPECT_EQ(cached.reused, 4);
  for (size_t mb = 0; mb < fresh.outputs.size(); ++mb) {
    EXPECT_TRUE(at::equal(fresh.outputs[mb], cached.outputs[mb])) << "micro-batch " << mb;
  }
  EXPECT_TRUE(at::equal(fresh.grad, cached.grad));
}

TEST(WeightCastTest, ANewTensorOrStorageIsCastAgainAndTheLastCacheFreesTheCopies) {
  at::Tensor w = at::ones({4, 4});
  {
    WeightCastCache cache;
    const at::Tensor first = CastWeight(w, at::kBFloat16);
    EXPECT_TRUE(CastWeight(w, at::kBFloat16).is_same(first));  // served again
    EXPECT_TRUE(CastWeight(w, at::kFloat).is_same(w));         // its own dtype: itself
    w.set_data(at::full({4, 4}, 2.0));                         // another storage, same version
    const at::Tensor second = CastWeight(w, at::kBFloat16);
    EXPECT_FALSE(second.is_same(first));
    EXPECT_TRUE(at::equal(second, at::full({4, 4}, 2.0, at::kBFloat16)));
    {
      WeightCastCache inner;  // a second user: the copies stay when it goes
    }
    EXPECT_TRUE(CastWeight(w, at::kBFloat16).is_same(second));
  }
  // No cache: every call casts anew.
  EXPECT_FALSE(CastWeight(w, at::kBFloat16).is_same(CastWeight(w, at::kBFloat16)));
}

}  // namespace
}  // namespace conveyor
