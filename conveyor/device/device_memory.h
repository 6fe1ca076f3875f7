// Memory of a GPU as its caching allocator counts it (no device synchronisation: the counts
// are kept on the host as tensors are allocated and freed).
//
// On a CPU device, or in a build without CUDA (CMake defines CONVEYOR_WITH_CUDA for the
// profile layer where libtorch has CUDA), every count is 0 and has_counts() is false: the
// CPU's memory is MemoryTracker's.
//
// Thread-safety: the functions may be called from any thread.
#ifndef CONVEYOR_DEVICE_DEVICE_MEMORY_H_
#define CONVEYOR_DEVICE_DEVICE_MEMORY_H_

#include <c10/core/Device.h>

#include <cstdint>

namespace conveyor {

struct DeviceMemory {
  bool has_counts = false;           // whether the device's allocator was read
  int64_t allocated_bytes = 0;       // held by tensors now
  int64_t reserved_bytes = 0;        // held by the caching allocator now (allocated + cached)
  int64_t peak_allocated_bytes = 0;  // since the last ResetDeviceMemoryPeaks
  int64_t peak_reserved_bytes = 0;
};

DeviceMemory ReadDeviceMemory(const c10::Device& device);

// Restarts both peaks of `device` from the current counts (nothing on a CPU device).
void ResetDeviceMemoryPeaks(const c10::Device& device);

}  // namespace conveyor

#endif  // CONVEYOR_DEVICE_DEVICE_MEMORY_H_
