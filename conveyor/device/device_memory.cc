#include "conveyor/device/device_memory.h"

#ifdef CONVEYOR_WITH_CUDA
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace conveyor {

#ifdef CONVEYOR_WITH_CUDA
namespace {
// The caching allocator knows a device only once CUDA is initialised, which the first tensor
// there does (torch 2.11 throws "Invalid device argument" before). Once per process; the
// empty tensor allocates nothing.
void InitialiseCuda(const c10::Device& device) {
  static const bool done = (at::empty({0}, at::TensorOptions().device(device)), true);
  (void)done;
}
}  // namespace
#endif

DeviceMemory ReadDeviceMemory(const c10::Device& device) {
  DeviceMemory m;
#ifdef CONVEYOR_WITH_CUDA
  if (!device.is_cuda()) return m;
  InitialiseCuda(device);
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
  if (!device.is_cuda()) return;
  InitialiseCuda(device);
  c10::cuda::CUDACachingAllocator::resetPeakStats(device.index());
#else
  (void)device;
#endif
}

}  // namespace conveyor
