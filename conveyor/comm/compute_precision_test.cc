#include "conveyor/comm/compute_precision.h"

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

}  // namespace
}  // namespace conveyor
