#include "conveyor/nn/linear.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

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

}  // namespace
}  // namespace conveyor
