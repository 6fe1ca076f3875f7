#include "conveyor/profile/device_memory.h"

#ifdef CONVEYOR_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace conveyor {

DeviceMemory ReadDeviceMemory(const c10::Device& device) {
  DeviceMemory m;
#ifdef CONVEYOR_WITH_CUDA
  if (!device.is_cuda()) return m;
  // Index 0 of each statistic is the aggregate over small and large pools.
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
  m.has_counts = true;
  m.allocated_bytes = stats.allocated_bytes[0].current;
  m.reserved_bytes = stats.reserved_bytes[0].current;
  m.peak_allocated_bytes = stats.allocated_bytes[0].peak;
  m.peak_reserved_bytes = stats.reserved_bytes[0].peak;
#else
  (void)device;
#endif
  return m;
}

void ResetDeviceMemoryPeaks(const c10::Device& device) {
#ifdef CONVEYOR_WITH_CUDA
  if (device.is_cuda()) c10::cuda::CUDACachingAllocator::resetPeakStats(device.index());
#else
  (void)device;
#endif
}

}  // namespace conveyor
