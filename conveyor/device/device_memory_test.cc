#include "conveyor/device/device_memory.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>

namespace conveyor {
namespace {

TEST(DeviceMemoryTest, TheCpuHasNoDeviceCounts) {
  const c10::Device cpu(c10::DeviceType::CPU);
  ResetDeviceMemoryPeaks(cpu);
  const DeviceMemory m = ReadDeviceMemory(cpu);
  EXPECT_FALSE(m.has_counts);
  EXPECT_EQ(m.allocated_bytes, 0);
  EXPECT_EQ(m.peak_reserved_bytes, 0);
}

// A 64 MiB tensor shows in the allocated and reserved counts and their peaks, and the peak
// stays after it is freed until the peaks are reset.
TEST(DeviceMemoryTest, AGpuTensorIsCountedAndPeaksReset) {
  if (torch::cuda::device_count() == 0) {
    GTEST_SKIP() << "no CUDA device";
  }
  const c10::Device gpu(c10::DeviceType::CUDA, 0);
  constexpr int64_t kBytes = 64 << 20;
  const DeviceMemory before = ReadDeviceMemory(gpu);
  ASSERT_TRUE(before.has_counts);
  {
    at::Tensor t = at::empty({kBytes}, at::TensorOptions(at::kByte).device(gpu));
    const DeviceMemory during = ReadDeviceMemory(gpu);
    EXPECT_GE(during.allocated_bytes - before.allocated_bytes, kBytes);
    EXPECT_GE(during.reserved_bytes, during.allocated_bytes);
    EXPECT_GE(during.peak_allocated_bytes, during.allocated_bytes);
  }
  const DeviceMemory after = ReadDeviceMemory(gpu);
  EXPECT_LT(after.allocated_bytes, before.allocated_bytes + kBytes);
  EXPECT_GE(after.peak_allocated_bytes, before.allocated_bytes + kBytes);
  ResetDeviceMemoryPeaks(gpu);
  EXPECT_LT(ReadDeviceMemory(gpu).peak_allocated_bytes, before.allocated_bytes + kBytes);
}

}  // namespace
}  // namespace conveyor
