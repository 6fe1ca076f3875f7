// The trainer's report of auxiliary losses (module/auxiliary_loss.h): every step, by name,
// summed over micro-batches, stages and replicas as one process sums them.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "conveyor/comm/local_transport.h"
#include "conveyor/comm/rank_threads.h"
#include "conveyor/module/auxiliary_loss.h"
#include "conveyor/nn/layer.h"
#include "conveyor/train/builtin_tasks.h"
#include "conveyor/train/train_testing.h"
#include "conveyor/train/trainer.h"

namespace conveyor {
namespace {

// A layer that passes its wrapped layer's output on and attaches 0.01 x the mean squared
// norm of its rows over the counted targets as the auxiliary loss "square".
class SquareTermLayer : public Layer {
 public:
  explicit SquareTermLayer(std::shared_ptr<Layer> inner) : inner_(std::move(inner)) {}
  at::Tensor Forward(const at::Tensor& x, const MicroBatch& mb) override {
    const at::Tensor y = inner_->Forward(x, mb);                      // (n, T, C)
    const at::Tensor counted = mb.targets.ge(0).to(y.scalar_type());  // (n, T)
    const at::Tensor term = 0.01 * ((y * y).sum(-1) * counted).sum() / counted.sum().clamp_min(1);
    return AttachAuxiliaryLoss(y, term, "square");
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

// A model whose layer `at` carries the "square" term, which it declares.
class SquareTermModel : public ModelTask {
 public:
  SquareTermModel(std::shared_ptr<const ModelTask> model, int at)
      : model_(std::move(model)), at_(at) {}
  int num_layers() const override { return model_->num_layers(); }
  LayerList BuildLayers(const ParallelContext& parallel, LayerRange range) const override {
    LayerList layers = model_->BuildLayers(parallel, range);
    if (range.begin <= at_ && at_ < range.end) {
      layers[at_ - range.begin] = std::make_shared<SquareTermLayer>(layers[at_ - range.begin]);
    }
    return layers;
  }
  std::vector<double> LayerFlops() const override { return model_->LayerFlops(); }
  std::string Describe() const override { return model_->Describe(); }
  std::vector<std::string> AuxiliaryLossNames() const override { return {"square"}; }

 private:
  std::shared_ptr<const ModelTask> model_;
  int at_;
};

// Every step's metrics, checked to be the same on every rank (loss and auxiliary losses).
std::vector<StepMetrics> StepsOnThreads(const TrainConfig& c, std::shared_ptr<const TrainTask> task,
                                        const std::string& what) {
  auto world = LocalWorld(std::max(c.dp, 1) * c.tp * c.pp);
  std::mutex mu;
  std::map<int, std::vector<StepMetrics>> steps;
  RunRankThreads(world, [&](int r) {
    Trainer trainer(c, task, InProcessRank(world[r].get(), c.device));
    std::vector<StepMetrics> mine;
    while (trainer.step() < c.steps) mine.push_back(trainer.Step());
    std::lock_guard<std::mutex> lock(mu);
    steps[r] = mine;
  });
  for (const auto& [r, mine] : steps) {
    for (size_t i = 0; i < mine.size(); ++i) {
      EXPECT_EQ(mine[i].loss, steps[0][i].loss) << what << " rank " << r;
      EXPECT_EQ(mine[i].auxiliary_losses, steps[0][i].auxiliary_losses) << what << " rank " << r;
    }
  }
  return steps[0];
}

// An auxiliary loss attached inside a middle layer is reported every step, by its name, with
// the same value on every rank whatever the pipeline, schedule and data parallelism (summed
// over micro-batches, stages and replicas as one process sums it), and its gradient trains
// the model as in one process; a model without one reports none.
TEST(TrainerAuxiliaryLossTest,
     AnAuxiliaryLossOfAMiddleLayerIsReportedEveryStepAsOneProcessReportsIt) {
  at::set_num_threads(1);
  TrainConfig base = TinyGpt();
  base.batch_size = 8;  // 4 micro-batches of 2 samples; of 1 on each of 2 replicas
  const auto task = [](const TrainConfig& c) {
    auto plain = MakeTask(c);
    return std::make_shared<ModelSwapTask>(
        plain, std::make_shared<SquareTermModel>(plain->model(), plain->model()->num_layers() / 2));
  };
  const std::vector<StepMetrics> reference = StepsOnThreads(base, task(base), "one process");
  ASSERT_EQ(reference.size(), 3u);
  for (const StepMetrics& m : reference) {
    ASSERT_EQ(m.auxiliary_losses.size(), 1u);
    EXPECT_GT(m.auxiliary_losses.at("square"), 0);
  }
  const std::vector<StepMetrics> plain = StepsOnThreads(base, MakeTask(base), "plain");
  EXPECT_TRUE(plain[0].auxiliary_losses.empty());
  EXPECT_EQ(plain[0].loss, reference[0].loss);  // the term is not part of the loss
  EXPECT_NE(plain[2].loss, reference[2].loss);  // but its gradient trained the model
  const struct {
    int dp, pp;
    const char* schedule;
  } runs[] = {{1, 2, "1f1b"}, {1, 2, "zb-v"}, {2, 2, "interleaved-1f1b"}, {2, 1, "gpipe"}};
  for (const auto& run : runs) {
    TrainConfig c = base;
    c.dp = run.dp;
    c.pp = run.pp;
    c.schedule = run.schedule;
    const std::string what =
        "dp " + std::to_string(run.dp) + " x pp " + std::to_string(run.pp) + " " + run.schedule;
    const std::vector<StepMetrics> got = StepsOnThreads(c, task(c), what);
    ASSERT_EQ(got.size(), reference.size()) << what;
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_NEAR(got[i].loss, reference[i].loss, 1e-5 * reference[i].loss) << what;
      ASSERT_EQ(got[i].auxiliary_losses.size(), 1u) << what;
      const double want = reference[i].auxiliary_losses.at("square");
      EXPECT_NEAR(got[i].auxiliary_losses.at("square"), want, 1e-5 * want) << what << " step " << i;
    }
  }
}

}  // namespace
}  // namespace conveyor
