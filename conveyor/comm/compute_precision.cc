#include "conveyor/comm/compute_precision.h"

#include "conveyor/comm/torch_compat.h"

namespace conveyor {

std::optional<c10::ScalarType> AutocastDtype(c10::DeviceType device_type) {
  if (!IsAutocastEnabled(device_type)) return std::nullopt;
  return GetAutocastDtype(device_type);
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
