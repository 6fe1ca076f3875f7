#include "conveyor/device/compute_precision.h"

#include <ATen/ATen.h>

#include <exception>

#include "conveyor/common/spellings.h"
#include "conveyor/device/torch_compat.h"

namespace conveyor {
namespace {

constexpr Spellings<ComputeDtype, 3> kComputeDtypes = {{
    {ComputeDtype::kFp32, "fp32"},
    {ComputeDtype::kBf16, "bf16"},
    {ComputeDtype::kFp16, "fp16"},
}};

}  // namespace

ComputeDtype ParseComputeDtype(std::string_view text, std::string_view name) {
  return ParseSpelling(kComputeDtypes, text, name);
}

std::string_view ComputeDtypeName(ComputeDtype dtype) { return SpellingOf(kComputeDtypes, dtype); }

c10::ScalarType ScalarTypeOf(ComputeDtype dtype) {
  switch (dtype) {
    case ComputeDtype::kBf16:
      return c10::ScalarType::BFloat16;
    case ComputeDtype::kFp16:
      return c10::ScalarType::Half;
    case ComputeDtype::kFp32:
      break;
  }
  return c10::ScalarType::Float;
}

std::optional<c10::ScalarType> AutocastDtype(c10::DeviceType device_type) {
  if (!IsAutocastEnabled(device_type)) return std::nullopt;
  return GetAutocastDtype(device_type);
}

bool AutocastComputesIn(c10::Device device, c10::ScalarType dtype) {
  try {
    const at::Tensor a = at::ones({2, 2}, at::TensorOptions().device(device));
    const ComputePrecisionGuard precision(device.type(), dtype, true);
    return at::matmul(a, a).scalar_type() == dtype;
  } catch (const std::exception&) {
    return false;
  }
}

ComputePrecisionGuard::ComputePrecisionGuard(c10::DeviceType device_type, c10::ScalarType dtype,
                                             bool enabled)
    : device_type_(device_type), active_(enabled) {
  if (!active_) return;
  previous_enabled_ = IsAutocastEnabled(device_type_);
  previous_dtype_ = GetAutocastDtype(device_type_);
  SetAutocastDtype(device_type_, dtype);
  SetAutocastEnabled(device_type_, true);
}

ComputePrecisionGuard::~ComputePrecisionGuard() {
  if (!active_) return;
  SetAutocastEnabled(device_type_, previous_enabled_);
  SetAutocastDtype(device_type_, previous_dtype_);
  at::autocast::clear_cache();
}

}  // namespace conveyor
