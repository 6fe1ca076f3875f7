#include "conveyor/device/device_timer.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>

namespace conveyor {
namespace {

bool HasGpu() { return torch::cuda::device_count() > 0; }

TEST(DeviceTimerTest, TheCpuIsTimedByTheHost) {
  DeviceTimer timer(c10::Device(c10::DeviceType::CPU));
  EXPECT_FALSE(timer.active());
  EXPECT_TRUE(timer.Resolve().empty());
}

// Three marks around two products of different sizes on the current stream: resolved, each
// lies before the next, and the last is the reference. Which product took longer is not
// asserted: between marks the GPU may also wait for the host, which a busy CPU delays.
TEST(DeviceTimerTest, MarksOnAGpuResolveToTheirDistanceFromTheLast) {
  if (!HasGpu()) GTEST_SKIP() << "no CUDA device";
  const c10::Device gpu(c10::DeviceType::CUDA, 0);
  DeviceTimer timer(gpu);
  if (!timer.active()) GTEST_SKIP() << "this libtorch's events do not measure time";
  const at::Tensor small = at::randn({256, 256}, at::TensorOptions().device(gpu));
  const at::Tensor large = at::randn({4096, 4096}, at::TensorOptions().device(gpu));
  large.mm(large).sum().item<float>();  // the first product loads the BLAS library: not timed
  EXPECT_EQ(timer.Mark(), 0);
  at::Tensor a = small.mm(small);
  EXPECT_EQ(timer.Mark(), 1);
  at::Tensor b = large.mm(large).mm(large);
  EXPECT_EQ(timer.Mark(), 2);
  const std::vector<double> seconds = timer.Resolve();
  ASSERT_EQ(seconds.size(), 3u);
  EXPECT_EQ(seconds[2], 0);
  EXPECT_GT(seconds[1], 0);              // the large products lie between marks 1 and 2
  EXPECT_GT(seconds[0], seconds[1]);     // and the small one between marks 0 and 1
  EXPECT_TRUE(timer.Resolve().empty());  // the marks are forgotten
}

}  // namespace
}  // namespace conveyor
