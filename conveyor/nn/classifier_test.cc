#include "conveyor/nn/classifier.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

#include <memory>
#include <set>
#include <string>

#include "conveyor/common/error.h"
#include "conveyor/nn/classifier_testing.h"

namespace conveyor {
namespace {

at::Tensor Logits(const LayerList& layers, const MicroBatch& mb) {
  return LayerStack(layers).Forward(mb.inputs, mb);
}

TEST(ClassifierTest, ConfigErrorsNameTheValue) {
  auto refused = [](void (*edit)(ClassifierConfig&), const std::string& what) {
    ClassifierConfig c = SmallClassifier();
    edit(c);
    try {
      BuildClassifier(c, 1);
      ADD_FAILURE() << "accepted a bad " << what;
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  refused([](ClassifierConfig& c) { c.vocab = 0; }, "vocab");
  refused([](ClassifierConfig& c) { c.hidden = 0; }, "hidden");
  refused([](ClassifierConfig& c) { c.heads = 3; }, "heads (3)");
  refused([](ClassifierConfig& c) { c.layers = 0; }, "layers");
  refused([](ClassifierConfig& c) { c.max_seq_len = 0; }, "max_seq_len");
  refused([](ClassifierConfig& c) { c.classes = 1; }, "classes");
}

TEST(ClassifierTest, Shapes) {
  const ClassifierConfig c = SmallClassifier();
  const LayerList layers = BuildClassifier(c, 1);
  ASSERT_EQ(layers.size(), size_t(c.layers + 2));
  const MicroBatch mb = ClassifierMicroBatch(c, 5, 7, 2);
  at::Tensor x = mb.inputs;
  for (size_t i = 0; i + 1 < layers.size(); ++i) {
    EXPECT_FALSE(layers[i]->has_loss());
    x = layers[i]->Forward(x, mb);
    EXPECT_EQ(x.sizes(), (std::vector<int64_t>{5, 7, c.hidden})) << "layer " << i;
  }
  ASSERT_TRUE(layers.back()->has_loss());
  const at::Tensor logits = layers.back()->Forward(x, mb);
  EXPECT_EQ(logits.sizes(), (std::vector<int64_t>{5, c.classes}));
  EXPECT_EQ(layers.back()->LossSum(logits, mb).dim(), 0);
}

TEST(ClassifierTest, ParameterNamesAreGlobalAndUnique) {
  const ClassifierConfig c = SmallClassifier();
  std::set<std::string> names;
  for (const auto& [name, p] : LayerStack(BuildClassifier(c, 1)).NamedParameters()) {
    EXPECT_TRUE(p.requires_grad()) << name;
    EXPECT_TRUE(names.insert(name).second) << "duplicate " << name;
  }
  EXPECT_EQ(names.size(), size_t(4 + 12 * c.layers + 4));
  EXPECT_TRUE(names.count("blocks.2.attn.qkv.weight"));
  EXPECT_TRUE(names.count("head.out.bias"));
}

TEST(ClassifierTest, AppendedPaddingDoesNotChangeLogits) {
  const ClassifierConfig c = SmallClassifier();
  const LayerList layers = BuildClassifier(c, 3);
  const MicroBatch mb = ClassifierMicroBatch(c, 4, 6, 4);
  MicroBatch padded = mb;
  at::Tensor junk = at::randint(c.vocab, {4, 6}, LayerInitGenerator(5, 0), at::kLong);
  padded.inputs = at::cat({mb.inputs, junk.narrow(1, 0, 5)}, 1);
  padded.attention_mask = at::cat({mb.attention_mask, at::zeros({4, 5}, at::kBool)}, 1);
  EXPECT_TRUE(at::allclose(Logits(layers, mb), Logits(layers, padded), 1e-5, 1e-6));
  // The padded positions inside the original length do not matter either.
  MicroBatch scrambled = mb;
  scrambled.inputs = at::where(mb.attention_mask, mb.inputs, junk);
  EXPECT_TRUE(at::allclose(Logits(layers, mb), Logits(layers, scrambled), 1e-5, 1e-6));
}

TEST(ClassifierTest, InitialisationFollowsTheSeed) {
  const ClassifierConfig c = SmallClassifier();
  const NamedTensors a = LayerStack(BuildClassifier(c, 7)).NamedParameters();
  const NamedTensors b = LayerStack(BuildClassifier(c, 7)).NamedParameters();
  const NamedTensors other = LayerStack(BuildClassifier(c, 8)).NamedParameters();
  ASSERT_EQ(a.size(), b.size());
  bool differs = false;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].first, b[i].first);
    EXPECT_TRUE(at::equal(a[i].second, b[i].second)) << a[i].first;
    differs = differs || !at::equal(a[i].second, other[i].second);
  }
  EXPECT_TRUE(differs);
  EXPECT_FALSE(at::equal(a[0].second, other[0].second)) << "the embedding ignored the seed";
}

TEST(ClassifierTest, StagesRunInSequenceEqualTheWhole) {
  const ClassifierConfig c = SmallClassifier();
  const MicroBatch mb = ClassifierMicroBatch(c, 6, 9, 6);
  const LayerList all = BuildClassifier(c, 11);
  const at::Tensor whole = Logits(all, mb);
  for (int cut : {1, 2, 4}) {
    const LayerList split = BuildClassifier(c, 11);
    LayerStack first(LayerList(split.begin(), split.begin() + cut));
    LayerStack second(LayerList(split.begin() + cut, split.end()));
    EXPECT_TRUE(at::equal(whole, second.Forward(first.Forward(mb.inputs, mb), mb))) << cut;
  }
}

TEST(ClassifierTest, LossCountsOnlyTargetsAndChecksTheirShape) {
  const ClassifierConfig c = SmallClassifier();
  const LayerList layers = BuildClassifier(c, 1);
  MicroBatch mb = ClassifierMicroBatch(c, 4, 5, 1);
  const at::Tensor logits = Logits(layers, mb);
  mb.targets = at::tensor({2, -1, 0, -1}, at::kLong);
  const at::Tensor log_p = logits.log_softmax(-1);
  const double want = -(log_p[0][2] + log_p[2][0]).item<double>();
  EXPECT_NEAR(layers.back()->LossSum(logits, mb).item<double>(), want, 1e-5);
  mb.targets = at::zeros({4, 5}, at::kLong);
  EXPECT_THROW(layers.back()->LossSum(logits, mb), UserError);
}

TEST(ClassifierTest, CountCorrectSkipsUncountedTargets) {
  const at::Tensor logits = at::tensor({0.f, 1.f, 3.f, 2.f, 5.f, 4.f}).view({3, 2});
  EXPECT_EQ(CountCorrect(logits, at::tensor({1, 0, 1}, at::kLong)), 2);
  EXPECT_EQ(CountCorrect(logits, at::tensor({1, -1, 0}, at::kLong)), 2);
  EXPECT_THROW(CountCorrect(logits, at::tensor({1, 0}, at::kLong)), UserError);
}

// Class 1 iff token 7 is among the real tokens; half the samples have it.
MicroBatch TokenSevenTask(const ClassifierConfig& c, int64_t n, at::Generator& gen) {
  const int64_t t = c.max_seq_len;
  MicroBatch mb;
  mb.inputs = at::randint(c.vocab - 1, {n, t}, gen, at::kLong);
  mb.inputs += mb.inputs.ge(7).to(at::kLong);  // no 7 yet
  at::Tensor lengths = at::randint(2, t + 1, {n, 1}, gen, at::kLong);
  mb.attention_mask = at::arange(t, at::kLong).unsqueeze(0).lt(lengths);
  mb.targets = at::randint(2, {n}, gen, at::kLong);
  at::Tensor where = (at::rand({n, 1}, gen) * lengths).to(at::kLong);  // a real position
  at::Tensor hit =
      at::arange(t, at::kLong).unsqueeze(0).eq(where).logical_and(mb.targets.unsqueeze(1).eq(1));
  mb.inputs.masked_fill_(hit, 7);
  mb.loss_denominator = double(n);
  return mb;
}

TEST(ClassifierTest, LearnsWhetherTokenSevenAppears) {
  ClassifierConfig c = SmallClassifier();
  c.vocab = 12;
  c.layers = 2;
  c.max_seq_len = 8;
  c.classes = 2;
  LayerStack model(BuildClassifier(c, 21));
  at::Generator gen = LayerInitGenerator(22, 0);
  NamedTensors params = model.NamedParameters();
  std::vector<at::Tensor> m1, m2;  // Adam moments
  for (auto& [name, p] : params) {
    m1.push_back(at::zeros_like(p));
    m2.push_back(at::zeros_like(p));
  }
  const double lr = 1e-2, beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  for (int step = 1; step <= 300; ++step) {
    const MicroBatch mb = TokenSevenTask(c, 32, gen);
    (model.LossSum(model.Forward(mb.inputs, mb), mb) / mb.loss_denominator).backward();
    at::NoGradGuard no_grad;
    for (size_t i = 0; i < params.size(); ++i) {
      at::Tensor& p = params[i].second;
      m1[i].mul_(beta1).add_(p.grad(), 1 - beta1);
      m2[i].mul_(beta2).addcmul_(p.grad(), p.grad(), 1 - beta2);
      const double c1 = 1 - std::pow(beta1, step), c2 = 1 - std::pow(beta2, step);
      p.sub_(lr * (m1[i] / c1) / ((m2[i] / c2).sqrt() + eps));
      p.mutable_grad().reset();
    }
  }
  at::NoGradGuard no_grad;
  const MicroBatch test = TokenSevenTask(c, 512, gen);
  const at::Tensor logits = model.Forward(test.inputs, test);
  const double accuracy = double(CountCorrect(logits, test.targets)) / 512;
  EXPECT_GT(accuracy, 0.9);
}

}  // namespace
}  // namespace conveyor
