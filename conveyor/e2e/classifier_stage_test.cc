// The classifier as runtime stages: split backward (I then W, the weight GEMMs deferred in
// each stage's WeightGradStore) over two stages gives the gradients of one full backward.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>

#include "conveyor/nn/classifier.h"
#include "conveyor/nn/classifier_testing.h"
#include "conveyor/runtime/stage.h"

namespace conveyor {
namespace {

std::map<std::string, at::Tensor> Grads(StageModule& module) {
  std::map<std::string, at::Tensor> grads;
  for (const auto& [name, p] : module.NamedParameters()) grads[name] = p.grad();
  return grads;
}

TEST(ClassifierTest, DeferredWeightGradientsEqualFullBackward) {
  const ClassifierConfig c = SmallClassifier();
  MicroBatch mb = ClassifierMicroBatch(c, 5, 8, 9);
  mb.targets[1] = -1;
  mb.loss_denominator = 4;

  Stage whole(0, true, true, std::make_unique<LayerStack>(BuildClassifier(c, 13)));
  whole.Forward(mb, mb.inputs);
  whole.Backward(mb, at::Tensor());
  const auto want = Grads(whole.module());

  const LayerList split = BuildClassifier(c, 13);
  const int cut = 2;
  Stage first(0, true, false,
              std::make_unique<LayerStack>(LayerList(split.begin(), split.begin() + cut)));
  Stage last(1, false, true,
             std::make_unique<LayerStack>(LayerList(split.begin() + cut, split.end())));
  last.Forward(mb, first.Forward(mb, mb.inputs));
  EXPECT_DOUBLE_EQ(last.loss(), whole.loss());
  const at::Tensor grad = last.BackwardInput(mb, at::Tensor());
  first.BackwardInput(mb, grad);
  EXPECT_GT(last.pending_weight_work(), 0u);
  EXPECT_FALSE(Grads(last.module()).at("head.out.weight").defined()) << "not deferred";
  last.BackwardWeight(mb);
  first.BackwardWeight(mb);

  auto got = Grads(first.module());
  got.merge(Grads(last.module()));
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [name, g] : want) {
    ASSERT_TRUE(got.at(name).defined()) << name;
    EXPECT_TRUE(at::allclose(g, got.at(name), 1e-5, 1e-6)) << name;
  }
}

}  // namespace
}  // namespace conveyor
