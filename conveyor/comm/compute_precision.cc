#include "conveyor/comm/compute_precision.h"

#include <ATen/ATen.h>

#include <exception>

#include "conveyor/comm/torch_compat.h"

namespace conveyor {

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
