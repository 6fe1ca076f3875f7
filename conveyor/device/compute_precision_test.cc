#include "conveyor/device/compute_precision.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

namespace conveyor {
namespace {

TEST(ComputePrecisionGuardTest, CpuBf16MatmulInsideFp32AfterParametersStayFp32) {
  at::Tensor a = at::randn({4, 8});
  at::Tensor b = at::randn({8, 3});
  {
    ComputePrecisionGuard guard(c10::DeviceType::CPU, at::kBFloat16, /*enabled=*/true);
    EXPECT_EQ(at::mm(a, b).scalar_type(), at::kBFloat16);
  }
  EXPECT_EQ(at::mm(a, b).scalar_type(), at::kFloat);
  EXPECT_EQ(a.scalar_type(), at::kFloat);
}

TEST(ComputePrecisionGuardTest, DisabledGuardLeavesFp32) {
  ComputePrecisionGuard guard(c10::DeviceType::CPU, at::kBFloat16, /*enabled=*/false);
  EXPECT_EQ(at::mm(at::randn({2, 2}), at::randn({2, 2})).scalar_type(), at::kFloat);
}

TEST(ComputePrecisionGuardTest, TheProbeSaysWhatAGuardedProductGivesAndLeavesAutocastOff) {
  const at::Tensor a = at::randn({3, 3});
  EXPECT_TRUE(AutocastComputesIn(at::kCPU, at::kBFloat16));
  // Debian 12's libtorch 1.13 has no fp16 product on the CPU, torch 2.x has one: either way
  // the probe must agree with what a guarded product does.
  const bool fp16 = AutocastComputesIn(at::kCPU, at::kHalf);
  EXPECT_FALSE(AutocastDtype(c10::DeviceType::CPU).has_value());
  bool gives_fp16 = false;
  try {
    ComputePrecisionGuard guard(c10::DeviceType::CPU, at::kHalf, /*enabled=*/true);
    gives_fp16 = at::mm(a, a).scalar_type() == at::kHalf;
  } catch (const std::exception&) {
  }
  EXPECT_EQ(fp16, gives_fp16);
  EXPECT_EQ(at::mm(a, a).scalar_type(), at::kFloat);
}

}  // namespace
}  // namespace conveyor
