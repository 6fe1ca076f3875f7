// The trainer sums each parameter's gradient over the group its layout names
// (ParameterSpec::grad_sum), and refuses a layout naming a group the model does not create.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <string>

#include "conveyor/common/error.h"
#include "conveyor/nn/layer.h"
#include "conveyor/train/builtin_tasks.h"
#include "conveyor/train/train_testing.h"
#include "conveyor/train/trainer.h"

namespace conveyor {
namespace {

// A layer passing its wrapped layer on whose parameters declare their gradients summed over
// `axes` (their tensor-parallel split kept).
class SumOverLayer : public Layer {
 public:
  SumOverLayer(std::shared_ptr<Layer> inner, const Mesh::Order& axes) : inner_(std::move(inner)) {
    for (const auto& [name, p] : inner_->NamedParameters()) {
      ParameterSpec spec = inner_->parameter_specs().Of(name);
      spec.grad_sum.axes = axes;
      specs_.Declare(name, spec);
    }
  }
  at::Tensor Forward(const at::Tensor& x, const MicroBatch& mb) override {
    return inner_->Forward(x, mb);
  }
  NamedTensors NamedParameters() override { return inner_->NamedParameters(); }
  std::vector<int64_t> InputShape(const MicroBatch& mb) const override {
    return inner_->InputShape(mb);
  }
  std::vector<int64_t> OutputShape(const MicroBatch& mb) const override {
    return inner_->OutputShape(mb);
  }

 private:
  std::shared_ptr<Layer> inner_;
};

// A model whose layer `at` sums its gradients over `axes`.
class SumOverModel : public ModelTask {
 public:
  SumOverModel(std::shared_ptr<const ModelTask> model, int at, Mesh::Order axes)
      : model_(std::move(model)), at_(at), axes_(std::move(axes)) {}
  int num_layers() const override { return model_->num_layers(); }
  LayerList BuildLayers(const ParallelContext& parallel, LayerRange range) const override {
    LayerList layers = model_->BuildLayers(parallel, range);
    if (range.begin <= at_ && at_ < range.end) {
      layers[at_ - range.begin] = std::make_shared<SumOverLayer>(layers[at_ - range.begin], axes_);
    }
    return layers;
  }
  std::vector<double> LayerFlops() const override { return model_->LayerFlops(); }
  std::string Describe() const override { return model_->Describe(); }

 private:
  std::shared_ptr<const ModelTask> model_;
  int at_;
  Mesh::Order axes_;
};

std::shared_ptr<const TrainTask> SummingOver(const TrainConfig& c, const Mesh::Order& axes) {
  auto plain = MakeTask(c);
  return std::make_shared<ModelSwapTask>(plain,
                                         std::make_shared<SumOverModel>(plain->model(), 1, axes));
}

// A layer declaring the data-parallel group explicitly trains as the built-in model does
// (its gradients summed over the replicas, as every other parameter's).
TEST(TrainerGradientSumTest, ALayerDeclaringTheDataParallelGroupTrainsAsTheDefault) {
  at::set_num_threads(1);
  TrainConfig c = TinyGpt();
  c.pp = 2;
  c.dp = 2;
  c.steps = 2;
  c.batch_size = 8;
  const std::vector<double> plain = TrainOnThreads(c, {}, 0, MakeTask(c));
  const std::vector<double> declared = TrainOnThreads(c, {}, 0, SummingOver(c, {MeshAxis::kDp}));
  ExpectSameLosses(plain, declared, "grad_sum dp declared", 0);
}

// A parameter summing its gradient over a group no rank created is refused when the trainer
// is built, naming the parameter and the axes.
TEST(TrainerGradientSumTest, AGroupTheModelDoesNotCreateIsRefusedNamingTheParameter) {
  at::set_num_threads(1);
  TrainConfig c = TinyGpt();
  c.pp = 1;
  c.dp = 1;
  try {
    Trainer trainer(c, SummingOver(c, {MeshAxis::kTp}), InProcessRank(nullptr, c.device));
    FAIL() << "built a trainer whose parameters sum over tp";
  } catch (const InternalError& e) {
    EXPECT_NE(std::string(e.what()).find("sums its gradient over tp"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("blocks.0."), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace conveyor
