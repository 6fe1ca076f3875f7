// Stage's contracts: each micro-batch runs forward once, then a full backward or I then W;
// split backward gives the full backward's gradients; what crosses to the neighbours is in
// the message dtype.
#include "conveyor/runtime/stage.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "conveyor/common/error.h"
#include "conveyor/module/auxiliary_loss.h"
#include "conveyor/runtime/synthetic_stage.h"

namespace conveyor {
namespace {

// A middle stage (neither first nor last) of the synthetic model: (n, T, 1) -> (n, T, 1).
Stage MiddleStage() { return Stage(1, false, false, MakeSyntheticStage(1, SyntheticCosts{})); }

MicroBatch Micro(int index) {
  Batch batch;
  batch.inputs = at::ones({2, 3}, at::kLong);
  batch.targets = at::zeros({2, 3}, at::kLong);
  MicroBatch mb = SplitBatch(batch, 1)[0];
  mb.index = index;
  return mb;
}

at::Tensor Activation() { return at::arange(6, at::kFloat).reshape({2, 3, 1}) + 1; }

at::Tensor WeightGrad(Stage& stage) { return stage.module().NamedParameters()[0].second.grad(); }

TEST(StageTest, ForwardTwiceAndBackwardWithoutForwardAreBugs) {
  Stage stage = MiddleStage();
  const MicroBatch mb = Micro(0);
  stage.Forward(mb, Activation());
  EXPECT_THROW(stage.Forward(mb, Activation()), InternalError);
  EXPECT_THROW(stage.Backward(Micro(1), at::ones({2, 3, 1})), InternalError);
  EXPECT_THROW(stage.Backward(mb, at::Tensor()), InternalError);  // no output gradient
  stage.Backward(mb, at::ones({2, 3, 1}));
  EXPECT_EQ(stage.held(), 0u);
  EXPECT_NO_THROW(stage.ResetStep());
}

TEST(StageTest, WeightsBeforeInputsIsABugAndAStepEndsWithNothingOwed) {
  Stage stage = MiddleStage();
  const MicroBatch mb = Micro(0);
  stage.Forward(mb, Activation());
  EXPECT_THROW(stage.BackwardWeight(mb), InternalError);
  stage.BackwardInput(mb, at::ones({2, 3, 1}));
  EXPECT_THROW(stage.ResetStep(), InternalError);  // W still owed
  stage.BackwardWeight(mb);
  EXPECT_THROW(stage.BackwardWeight(mb), InternalError);  // W twice
  EXPECT_NO_THROW(stage.ResetStep());
}

// I computes the input gradient and leaves the weight's to W; together they give what one
// full backward gives.
TEST(StageTest, SplitBackwardGivesTheFullBackwardsGradients) {
  const at::Tensor grad_output = at::full({2, 3, 1}, 0.5);
  Stage full = MiddleStage();
  full.Forward(Micro(0), Activation());
  const at::Tensor full_input_grad = full.Backward(Micro(0), grad_output);

  Stage split = MiddleStage();
  split.Forward(Micro(0), Activation());
  const at::Tensor input_grad = split.BackwardInput(Micro(0), grad_output);
  EXPECT_TRUE(at::equal(input_grad, full_input_grad));
  EXPECT_EQ(split.pending_weight_work(), 1u);
  EXPECT_FALSE(WeightGrad(split).defined());
  split.BackwardWeight(Micro(0));
  EXPECT_EQ(split.pending_weight_work(), 0u);
  ASSERT_TRUE(WeightGrad(split).defined());
  EXPECT_TRUE(at::allclose(WeightGrad(split), WeightGrad(full)));
  EXPECT_GT(WeightGrad(full).abs().sum().item<double>(), 0);
}

// With bf16 messages the output handed on and the input gradient handed back are bf16, the
// stage computes in fp32 from the widened input, and fp32 (the default) passes through.
TEST(StageTest, WhatCrossesToTheNeighboursIsInTheMessageDtype) {
  for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    Stage stage = MiddleStage();
    stage.set_message_dtype(dtype);
    const at::Tensor out = stage.Forward(Micro(0), Activation().to(dtype));
    EXPECT_EQ(out.scalar_type(), dtype);
    Stage fp32 = MiddleStage();
    const at::Tensor want = fp32.Forward(Micro(0), Activation());  // rounded once, on the way out
    EXPECT_TRUE(at::equal(out, want.to(dtype)));
    const at::Tensor grad = stage.Backward(Micro(0), at::full({2, 3, 1}, 0.5, at::dtype(dtype)));
    EXPECT_EQ(grad.scalar_type(), dtype);
    EXPECT_EQ(stage.Infer(Micro(1), Activation().to(dtype)).scalar_type(), dtype);
  }
}

// A middle stage y = x w whose forward adds term = mean(y^2) to the loss.
class SquareTermModule : public StageModule {
 public:
  at::Tensor Forward(const at::Tensor& x, const MicroBatch&) override {
    const at::Tensor y = x * weight_;
    return AttachAuxiliaryLoss(y, (y * y).mean(), "square");
  }
  at::Tensor LossSum(const at::Tensor&, const MicroBatch&) override { return {}; }
  NamedTensors NamedParameters() override { return {{"w", weight_}}; }
  std::vector<int64_t> InputShape(const MicroBatch&) const override { return {2, 3, 1}; }
  std::vector<int64_t> OutputShape(const MicroBatch&) const override { return {2, 3, 1}; }

 private:
  at::Tensor weight_ = at::full({1}, 0.75).requires_grad_(true);
};

// The term's gradient is the one of share x term added to the loss, under the loss scale,
// and its value is counted once a micro-batch, recomputed or not.
TEST(StageTest, AnAuxiliaryLossOnAMiddleStageEntersItsBackwardOnce) {
  const at::Tensor grad_output = at::full({2, 3, 1}, 0.5);
  MicroBatch mb = Micro(0);
  mb.share = 0.25;
  constexpr double kScale = 8;
  // By hand: d/dw of sum(g y) + share x mean(y^2), y = x w, all times the loss scale.
  const at::Tensor w = at::full({1}, 0.75).requires_grad_(true);
  const at::Tensor y = Activation() * w;
  ((y * grad_output).sum() + 0.25 * (y * y).mean()).backward();
  const double term = 0.25 * (y * y).mean().item<double>();
  for (bool recompute : {false, true}) {
    Stage stage(1, false, false, std::make_unique<SquareTermModule>());
    stage.set_recompute(recompute);
    stage.set_loss_scale(kScale);
    stage.Forward(mb, Activation());
    const at::Tensor input_grad = stage.BackwardInput(mb, grad_output * kScale);
    stage.BackwardWeight(mb);
    const at::Tensor got = stage.module().NamedParameters()[0].second.grad();
    ASSERT_TRUE(got.defined());
    EXPECT_TRUE(at::allclose(got, w.grad() * kScale)) << got << " against " << w.grad() * kScale;
    EXPECT_TRUE(at::allclose(input_grad, (grad_output + 0.25 * 2 * y.detach() / 6) * 0.75 * kScale))
        << input_grad;
    ASSERT_EQ(stage.auxiliary_losses().count("square"), 1u) << "recompute " << recompute;
    EXPECT_NEAR(stage.auxiliary_losses().at("square"), term, 1e-12) << "counted once";
    stage.ResetStep();
    EXPECT_TRUE(stage.auxiliary_losses().empty());
  }
  // Inference adds nothing.
  Stage stage(1, false, false, std::make_unique<SquareTermModule>());
  stage.Infer(mb, Activation());
  EXPECT_TRUE(stage.auxiliary_losses().empty());
}

}  // namespace
}  // namespace conveyor
