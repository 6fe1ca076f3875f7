#include "conveyor/optim/optimizer.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "conveyor/common/error.h"

namespace conveyor {
namespace {

TEST(AdamWTest, FirstStepMovesByLrTimesSignAndDecaysMatrices) {
  at::Tensor w = at::ones({2, 2}).requires_grad_(true);
  at::Tensor b = at::ones({2}).requires_grad_(true);
  w.mutable_grad() = at::full({2, 2}, 0.5);
  b.mutable_grad() = at::full({2}, -2.0);
  AdamW adam(AdamWOptions{0.9, 0.95, 0, 0.1});
  adam.Step({{"w", w}, {"b", b}}, 0.01, 1);
  // Bias-corrected first step: m / sqrt(v) = sign(g); decay only on the matrix.
  EXPECT_TRUE(at::allclose(w, at::full({2, 2}, 1 * (1 - 0.01 * 0.1) - 0.01)));
  EXPECT_TRUE(at::allclose(b, at::full({2}, 1 + 0.01)));
}

TEST(AdamWTest, StateRoundTripsAndIsChecked) {
  at::Tensor w = at::ones({3}).requires_grad_(true);
  w.mutable_grad() = at::ones({3});
  AdamW a(AdamWOptions{});
  a.Step({{"w", w}}, 0.1, 1);
  const auto state = a.State();
  ASSERT_EQ(state.size(), 2u);
  AdamW b(AdamWOptions{});
  EXPECT_NO_THROW(b.LoadState({{"w", w}}, state));
  EXPECT_TRUE(at::equal(b.State().at("w/exp_avg"), state.at("w/exp_avg")));
  EXPECT_THROW(b.LoadState({{"v", w}}, state), UserError);
  auto wrong = state;
  wrong["w/exp_avg"] = at::zeros({4});
  EXPECT_THROW(b.LoadState({{"w", w}}, wrong), UserError);
}

TEST(LrScheduleTest, WarmUpThenCosineToTheFloor) {
  const LrSchedule s{1.0, 0.1, 10, 110};
  EXPECT_DOUBLE_EQ(s.At(1), 0.1);
  EXPECT_DOUBLE_EQ(s.At(10), 1.0);
  EXPECT_NEAR(s.At(60), 0.55, 1e-12);  // half way down the cosine
  EXPECT_NEAR(s.At(110), 0.1, 1e-12);
  EXPECT_NEAR(s.At(500), 0.1, 1e-12);
}

}  // namespace
}  // namespace conveyor
