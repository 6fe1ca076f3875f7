// The bytes tensors hold on a device, wherever they live: a GPU's caching allocator counts
// them itself (device/device_memory.h), the CPU's are MemoryTracker's (0 unless installed).
// Either count is the whole process's: ranks as threads sharing a device see one count.
//
// Thread-safety: as the counts they read (any thread).
#ifndef CONVEYOR_PROFILE_TENSOR_BYTES_H_
#define CONVEYOR_PROFILE_TENSOR_BYTES_H_

#include <c10/core/Device.h>

#include <cstdint>

namespace conveyor {

// Held by tensors on `device` now.
int64_t TensorBytes(const c10::Device& device);
// The most TensorBytes(device) has been since the last ResetTensorPeak(device).
int64_t PeakTensorBytes(const c10::Device& device);
// Restarts the peak from the current count.
void ResetTensorPeak(const c10::Device& device);

}  // namespace conveyor

#endif  // CONVEYOR_PROFILE_TENSOR_BYTES_H_
