#include "conveyor/nn/linear.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

#include "conveyor/device/compute_precision.h"
#include "conveyor/module/weight_grad_store.h"

namespace conveyor {
namespace {

struct Grads {
  at::Tensor x, w, b;
};

// y = Linear(x, w, b); loss = sum(y * y); backward, deferring when `store` defers key 3.
Grads Backprop(WeightGradStore* store, bool with_bias) {
  at::manual_seed(1);
  at::Tensor x = at::randn({2, 5, 4}).requires_grad_(true);
  at::Tensor w = at::randn({3, 4}).requires_grad_(true);
  at::Tensor b = with_bias ? at::randn({3}).requires_grad_(true) : at::Tensor();
  at::Tensor y;
  {
    WeightGradStore::Recording recording(store, 3);
    y = Linear(x, w, b);
  }
  EXPECT_EQ(y.sizes(), (std::vector<int64_t>{2, 5, 3}));
  torch::autograd::backward({(y * y).sum()});
  if (store != nullptr && store->deferring(3)) {
    EXPECT_FALSE(w.grad().defined()) << "the weight gradient should wait for W";
    EXPECT_EQ(store->pending(3), 1u);
    store->SetDeferring(3, false);
    EXPECT_EQ(store->Run(3), 1);
  }
  return {x.grad(), w.grad(), with_bias ? b.grad() : at::Tensor()};
}

TEST(LinearTest, MatchesAtLinear) {
  at::manual_seed(1);
  at::Tensor x = at::randn({2, 5, 4});
  at::Tensor w = at::randn({3, 4});
  at::Tensor b = at::randn({3});
  EXPECT_TRUE(at::allclose(Linear(x, w, b), at::linear(x, w, b)));
  EXPECT_TRUE(at::allclose(Linear(x, w, at::Tensor()), at::linear(x, w)));
}

TEST(LinearTest, DeferredWeightGradientEqualsImmediate) {
  for (bool with_bias : {true, false}) {
    const Grads immediate = Backprop(nullptr, with_bias);
    WeightGradStore store;
    store.SetDeferring(3, true);
    const Grads deferred = Backprop(&store, with_bias);
    EXPECT_TRUE(at::allclose(immediate.x, deferred.x));
    EXPECT_TRUE(at::allclose(immediate.w, deferred.w));
    if (with_bias) {
      EXPECT_TRUE(at::allclose(immediate.b, deferred.b));
    }
    EXPECT_EQ(store.pending(), 0u);
  }
}

TEST(LinearTest, NotDeferringComputesAtOnce) {
  WeightGradStore store;  // recording, but key 3 is not deferred
  const Grads g = Backprop(&store, true);
  EXPECT_TRUE(g.w.defined());
  EXPECT_EQ(store.pending(), 0u);
}

// Mixed precision: under bf16 autocast the product runs on bf16 casts, the output and x's
// gradient are fp32 again, the weight and bias gradients fp32, deferred or not; all equal a
// reference built from at::linear on the bf16 casts (same kernels, so up to fp32 rounding of
// the casts back).
TEST(LinearTest, UnderBf16AutocastMatchesAtLinearOnCasts) {
  at::manual_seed(2);
  const at::Tensor x0 = at::randn({2, 5, 4}), w0 = at::randn({3, 4}), b0 = at::randn({3});
  const at::Tensor g = at::randn({2, 5, 3});
  // Reference: autograd through at::linear on bf16 leaves.
  at::Tensor xr = x0.to(at::kBFloat16).requires_grad_(true);
  at::Tensor wr = w0.to(at::kBFloat16).requires_grad_(true);
  at::Tensor br = b0.to(at::kBFloat16).requires_grad_(true);
  const at::Tensor yr = at::linear(xr, wr, br);
  torch::autograd::backward({yr}, {g.to(at::kBFloat16)});
  for (const bool defer : {false, true}) {
    at::Tensor x = x0.clone().requires_grad_(true);
    at::Tensor w = w0.clone().requires_grad_(true);
    at::Tensor b = b0.clone().requires_grad_(true);
    WeightGradStore store;
    store.SetDeferring(3, defer);
    at::Tensor y;
    {
      const ComputePrecisionGuard bf16(c10::DeviceType::CPU, at::kBFloat16, true);
      WeightGradStore::Recording recording(&store, 3);
      y = Linear(x, w, b);
    }
    // The output stays in the compute dtype, as at::linear's under autocast.
    EXPECT_EQ(y.scalar_type(), at::kBFloat16);
    EXPECT_TRUE(at::equal(y, yr)) << "defer " << defer;
    torch::autograd::backward({y}, {g.to(at::kBFloat16)});
    if (defer) {
      store.SetDeferring(3, false);
      EXPECT_EQ(store.Run(3), 1);
    }
    ASSERT_EQ(w.grad().scalar_type(), at::kFloat);
    ASSERT_EQ(b.grad().scalar_type(), at::kFloat);
    ASSERT_EQ(x.grad().scalar_type(), at::kFloat);
    // bf16 keeps 8 bits of mantissa: the casts of the gradients differ by its rounding.
    EXPECT_TRUE(at::allclose(x.grad(), xr.grad().to(at::kFloat), 1e-2, 1e-2)) << defer;
    EXPECT_TRUE(at::allclose(w.grad(), wr.grad().to(at::kFloat), 1e-2, 1e-2)) << defer;
    EXPECT_TRUE(at::allclose(b.grad(), br.grad().to(at::kFloat), 1e-2, 1e-2)) << defer;
    // And not the fp32 product: bf16 really was used.
    EXPECT_FALSE(at::equal(y.to(at::kFloat), at::linear(x0, w0, b0))) << defer;
  }
}

}  // namespace
}  // namespace conveyor
