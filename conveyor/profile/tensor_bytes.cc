#include "conveyor/profile/tensor_bytes.h"

#include "conveyor/device/device_memory.h"
#include "conveyor/profile/memory_tracker.h"

namespace conveyor {

int64_t TensorBytes(const c10::Device& device) {
  const DeviceMemory memory = ReadDeviceMemory(device);
  return memory.has_counts ? memory.allocated_bytes : MemoryTracker::current_bytes();
}

int64_t PeakTensorBytes(const c10::Device& device) {
  const DeviceMemory memory = ReadDeviceMemory(device);
  return memory.has_counts ? memory.peak_allocated_bytes : MemoryTracker::peak_bytes();
}

void ResetTensorPeak(const c10::Device& device) {
  if (device.is_cpu()) {
    MemoryTracker::ResetPeak();
  } else {
    ResetDeviceMemoryPeaks(device);
  }
}

}  // namespace conveyor
