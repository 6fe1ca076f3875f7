#include "conveyor/train/layer_costs.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "conveyor/common/error.h"
#include "conveyor/train/builtin_tasks.h"
#include "conveyor/train/train_testing.h"

namespace conveyor {
namespace {

class LayerCostsTest : public ::testing::Test {
 protected:
  void SetUp() override { at::set_num_threads(1); }
};

TEST_F(LayerCostsTest, CountsParametersByDefault) {
  const TrainConfig c = TinyGpt();
  ASSERT_EQ(c.partition, PartitionBy::kParams);
  const auto task = MakeTask(c);
  const LayerList layers = BuildAllLayers(*task->model());
  const std::vector<double> costs =
      LayerCosts(c, *task->model(), task->model()->LayerShapes(), task.get());
  ASSERT_EQ(costs.size(), layers.size());
  for (size_t l = 0; l < layers.size(); ++l) {
    int64_t params = 0;
    for (const auto& [name, p] : layers[l]->NamedParameters()) params += p.numel();
    EXPECT_EQ(costs[l], static_cast<double>(params)) << "layer " << l;
  }
}

TEST_F(LayerCostsTest, UniformAndFlopsAreTheConfiguredCosts) {
  TrainConfig c = TinyGpt();
  const auto task = MakeTask(c);
  c.partition = PartitionBy::kUniform;
  EXPECT_EQ(LayerCosts(c, *task->model(), task->model()->LayerShapes(), task.get()),
            std::vector<double>(task->model()->num_layers(), 1.0));
  c.partition = PartitionBy::kFlops;
  EXPECT_EQ(LayerCosts(c, *task->model(), task->model()->LayerShapes(), task.get()),
            task->model()->LayerFlops());
}

// A Mixture-of-Experts model's sparse layers hold E experts and a token meets k of them: by
// default its layers weigh their FLOPs, not every expert's parameters.
TEST_F(LayerCostsTest, AMixtureOfExpertsWeighsItsLayersByTheirWork) {
  TrainConfig c = TinyLlama();
  c.model.experts = 8;
  c.model.top_k = 1;
  const auto task = MakeTask(c);
  ASSERT_EQ(c.partition, PartitionBy::kParams);
  EXPECT_EQ(LayerCosts(c, *task->model(), task->model()->LayerShapes(), task.get()),
            task->model()->LayerFlops());
}

TEST_F(LayerCostsTest, ProfileTimesEveryLayer) {
  TrainConfig c = TinyGpt();
  c.partition = PartitionBy::kProfile;
  const auto task = MakeTask(c);
  const std::vector<double> seconds =
      LayerCosts(c, *task->model(), task->model()->LayerShapes(), task.get());
  ASSERT_EQ(seconds.size(), static_cast<size_t>(task->model()->num_layers()));
  for (size_t l = 0; l < seconds.size(); ++l) {
    EXPECT_TRUE(std::isfinite(seconds[l]) && seconds[l] > 0) << "layer " << l << ": " << seconds[l];
  }
  // A model without training data cannot be timed.
  EXPECT_THROW(LayerCosts(c, *task->model(), task->model()->LayerShapes(), nullptr), UserError);
}

}  // namespace
}  // namespace conveyor
