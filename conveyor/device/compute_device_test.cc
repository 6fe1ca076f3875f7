#include "conveyor/device/compute_device.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "conveyor/common/error.h"

namespace conveyor {
namespace {

using ::testing::HasSubstr;

TEST(ComputeDeviceTest, CpuIsTheCpuAndAutoIsCudaOnlyWithAGpu) {
  EXPECT_TRUE(ComputeDevice(DeviceKind::kCpu, 0, 0).is_cpu());
  EXPECT_FALSE(UsesCuda(DeviceKind::kCpu));
  EXPECT_EQ(ComputeDevice(DeviceKind::kAuto, 3, 3).is_cuda(), VisibleGpus() > 0);
  EXPECT_EQ(UsesCuda(DeviceKind::kAuto), VisibleGpus() > 0);
}

TEST(ComputeDeviceTest, CudaWithoutAGpuIsRefusedNamingTheRank) {
  if (VisibleGpus() > 0) GTEST_SKIP() << "a GPU is visible";
  try {
    ComputeDevice(DeviceKind::kCuda, 5, 1);
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), HasSubstr("rank 5"));
    EXPECT_THAT(e.what(), HasSubstr("--device cuda"));
    EXPECT_THAT(e.what(), HasSubstr("--device cpu"));
  }
}

TEST(ComputeDeviceTest, RanksShareTheGpusRoundRobin) {
  const int gpus = VisibleGpus();
  if (gpus == 0) GTEST_SKIP() << "no CUDA device";
  for (int local = 0; local < 2 * gpus + 1; ++local) {
    const c10::Device d = ComputeDevice(DeviceKind::kCuda, local, local);
    EXPECT_TRUE(d.is_cuda());
    EXPECT_EQ(d.index(), local % gpus);
  }
}

TEST(ComputeDeviceTest, MovedParametersKeepTheirTensorsAndGradFlag) {
  at::Tensor w = at::ones({2, 3}).requires_grad_(true);
  const at::Tensor alias = w;  // a layer's handle on the same parameter
  const c10::Device target =
      VisibleGpus() > 0 ? c10::Device(c10::DeviceType::CUDA, 0) : c10::Device(c10::DeviceType::CPU);
  MoveParameters({{"w", w}}, target);
  EXPECT_EQ(alias.device(), target);
  EXPECT_TRUE(alias.requires_grad());
  EXPECT_TRUE(alias.is_leaf());
  EXPECT_TRUE(at::equal(alias.to(at::kCPU), at::ones({2, 3})));
}

}  // namespace
}  // namespace conveyor
