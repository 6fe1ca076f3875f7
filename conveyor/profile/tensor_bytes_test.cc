#include "conveyor/profile/tensor_bytes.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <vector>

#include "conveyor/device/compute_device.h"
#include "conveyor/profile/memory_tracker.h"

namespace conveyor {
namespace {

// A tensor of 4 MiB on `device` is counted while it lives, and the peak keeps it until reset.
void CountsOneTensor(const c10::Device& device) {
  const int64_t before = TensorBytes(device);
  ResetTensorPeak(device);
  {
    const at::Tensor t = at::empty({1 << 20}, at::TensorOptions().device(device));  // 4 MiB
    EXPECT_GE(TensorBytes(device) - before, 4 << 20) << device;
  }
  EXPECT_LT(TensorBytes(device) - before, 4 << 20) << device;
  EXPECT_GE(PeakTensorBytes(device) - before, 4 << 20) << device;
  ResetTensorPeak(device);
  EXPECT_LT(PeakTensorBytes(device) - before, 4 << 20) << device;
}

TEST(TensorBytesTest, TheCpusCountIsTheMemoryTrackers) {
  ASSERT_TRUE(MemoryTracker::Install());
  CountsOneTensor(c10::Device(c10::DeviceType::CPU));
}

TEST(TensorBytesTest, AGpusCountIsItsAllocators) {
  if (VisibleGpus() == 0) GTEST_SKIP() << "no CUDA device";
  const c10::Device gpu(c10::DeviceType::CUDA, 0);
  const int64_t cpu_before = MemoryTracker::current_bytes();
  CountsOneTensor(gpu);
  // The CPU's count saw none of it.
  EXPECT_LT(MemoryTracker::current_bytes() - cpu_before, 1 << 20);
}

}  // namespace
}  // namespace conveyor
