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
  const LayerList layers = task->model()->BuildLayers({});
  const std::vector<double> costs = LayerCosts(c, *task->model(), layers, task.get());
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
  const LayerList layers = task->model()->BuildLayers({});
  c.partition = PartitionBy::kUniform;
  EXPECT_EQ(LayerCosts(c, *task->model(), layers, task.get()),
            std::vector<double>(layers.size(), 1.0));
  c.partition = PartitionBy::kFlops;
  EXPECT_EQ(LayerCosts(c, *task->model(), layers, task.get()), task->model()->LayerFlops());
}

TEST_F(LayerCostsTest, ProfileTimesEveryLayerAndLeavesNoGradients) {
  TrainConfig c = TinyGpt();
  c.partition = PartitionBy::kProfile;
  const auto task = MakeTask(c);
  const LayerList layers = task->model()->BuildLayers({});
  const std::vector<double> seconds = LayerCosts(c, *task->model(), layers, task.get());
  ASSERT_EQ(seconds.size(), layers.size());
  for (size_t l = 0; l < seconds.size(); ++l) {
    EXPECT_TRUE(std::isfinite(seconds[l]) && seconds[l] > 0) << "layer " << l << ": " << seconds[l];
  }
  for (const auto& layer : layers) {
    for (const auto& [name, p] : layer->NamedParameters()) {
      EXPECT_FALSE(p.grad().defined()) << name;
    }
  }
  // A model without training data cannot be timed.
  EXPECT_THROW(LayerCosts(c, *task->model(), layers, nullptr), UserError);
}

}  // namespace
}  // namespace conveyor
