#include "conveyor/train/layer_profile.h"

#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "conveyor/common/process_stats.h"
#include "conveyor/device/compute_device.h"
#include "conveyor/train/train_testing.h"

namespace conveyor {
namespace {

// The backward is timed split as the runtime's I and W run it: a block's weight gradients
// are deferred work of their own (timing the input's gradient alone once computed them too,
// which left W at nothing), and its backward allocates beyond what its forward held.
// What W holds from I on is measured too.
TEST(LayerProfileTest, ABlocksBackwardSplitsIntoInputAndWeightWork) {
  at::set_num_threads(1);
  const TrainConfig config = TinyGpt();
  const LayerCostTable table = ProfileLayerKinds(config, {1, 2}, /*rounds=*/2, /*ranks=*/1);
  for (const LayerSample& s : table.block.at) {
    EXPECT_GT(s.forward_s, 0);
    EXPECT_GT(s.input_s, 0);
    EXPECT_GT(s.weight_s, 0);
    EXPECT_GT(s.backward_s, 0);
    EXPECT_GT(s.activation_bytes, 0);
    EXPECT_GT(s.backward_bytes, 0);
    // W holds its linear layers' inputs and output gradients from I on: most of what the
    // forward kept (measured: 8.0 of 9.0 MiB at 16 sequences), not half of it.
    EXPECT_GT(s.weight_bytes, 0.6 * s.activation_bytes);
    EXPECT_LT(s.weight_bytes, 1.5 * s.activation_bytes);
  }
  for (const LayerSample& s : table.head.at) EXPECT_GT(s.weight_s, 0) << "the head's projection";
  EXPECT_LT(table.block.at[0].activation_bytes, table.block.at[1].activation_bytes);
  for (double c : table.calibration) EXPECT_GT(c, 0);
  for (const LayerSample& s : table.block.at) EXPECT_GT(s.infer_s, 0) << "a no-grad forward";
}

// More ranks than cores: the capacity is measured for each count of them busy, the ranks
// forked processes passing messages around a ring as they take turns.
TEST(LayerProfileTest, RanksBeyondTheCoresHaveACapacityForEachBusyCount) {
  at::set_num_threads(1);
  const int ranks = AvailableCores() + 1;
  const LayerCostTable table = ProfileLayerKinds(TinyGpt(), {1, 2}, /*rounds=*/1, ranks);
  EXPECT_EQ(table.capacity_ranks, ranks);
  ASSERT_EQ(table.capacity.size(), 2u);
  for (const std::vector<double>& by_busy : table.capacity) {
    ASSERT_EQ(by_busy.size(), static_cast<size_t>(ranks));
    for (size_t k = 0; k < by_busy.size(); ++k) {
      EXPECT_GT(by_busy[k], 0);
      // k + 1 single-threaded processes do at most a lone one's work a core.
      EXPECT_LE(by_busy[k], std::min<double>(k + 1, AvailableCores()));
    }
  }
  EXPECT_GT(table.FullCapacity(), 0);
}

// On a GPU the layers are timed there, in the run's dtype, and the capacity of two ranks as
// threads sharing it (streams of their own) is measured; the planner reads the device.
TEST(LayerProfileTest, OnAGpuTheLayersAndTheSharingAreMeasuredThere) {
  if (VisibleGpus() == 0) GTEST_SKIP() << "no CUDA device";
  TrainConfig config = TinyGpt();
  config.device = DeviceKind::kCuda;
  config.dtype = ComputeDtype::kBf16;
  const LayerCostTable table = ProfileLayerKinds(config, {1, 4}, /*rounds=*/2, /*ranks=*/2);
  EXPECT_EQ(table.device, "cuda");
  EXPECT_EQ(table.element_bytes, 2) << "stages hand over bf16 messages";
  EXPECT_EQ(table.capacity_ranks, 2);
  // A capacity at each size for one and for two of them busy. Its value is a ratio of times
  // (about 1 to 2 on an idle GPU), which anything else on the machine moves: only > 0.
  ASSERT_EQ(table.capacity.size(), 2u);
  for (const std::vector<double>& by_busy : table.capacity) {
    ASSERT_EQ(by_busy.size(), 2u) << "one and two of them busy";
    for (double c : by_busy) {
      EXPECT_TRUE(std::isfinite(c)) << c;
      EXPECT_GT(c, 0);
    }
  }
  for (const LayerSample& s : table.block.at) {
    EXPECT_GT(s.forward_s, 0);
    EXPECT_GT(s.input_s, 0);
    EXPECT_GT(s.weight_s, 0);
    EXPECT_GT(s.activation_bytes, 0) << "counted by the GPU's allocator, not the CPU's";
    EXPECT_GT(s.backward_bytes, 0);
  }
  EXPECT_LT(table.block.at[0].activation_bytes, table.block.at[1].activation_bytes);
  EXPECT_GT(table.optimizer_s, 0);
}

}  // namespace
}  // namespace conveyor
