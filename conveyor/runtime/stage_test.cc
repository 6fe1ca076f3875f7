// Stage's contracts: each micro-batch runs forward once, then a full backward or I then W;
// split backward gives the full backward's gradients; what crosses to the neighbours is in
// the message dtype.
#include "conveyor/runtime/stage.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "conveyor/common/error.h"
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

}  // namespace
}  // namespace conveyor
