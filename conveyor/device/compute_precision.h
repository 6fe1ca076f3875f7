// ComputePrecisionGuard: runs this thread's forward passes under autocast (mixed precision)
// for one device type and lower-precision dtype, restoring the previous autocast state on exit.
// The libtorch-version differences of the autocast API live in device/torch_compat.h.
//
// Contract: construct on the thread that runs the forward pass; destroy on that same thread
// (RAII, not movable). On destruction the autocast cast cache is cleared, so weights updated
// by the optimizer afterwards are never served as stale low-precision copies.
// Thread-safety: autocast state is thread-local; a guard affects only its own thread.
#ifndef CONVEYOR_DEVICE_COMPUTE_PRECISION_H_
#define CONVEYOR_DEVICE_COMPUTE_PRECISION_H_

#include <c10/core/Device.h>
#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <optional>
#include <string_view>

namespace conveyor {

// The precision of the model's matrix products (--dtype): fp32 throughout, or bf16 / fp16
// products (autocast) with fp32 master weights, fp32 gradients and fp32 gradient reduction.
// fp16 comes with dynamic loss scaling (optim/loss_scaler.h) and needs a device whose libtorch
// has fp16 matrix products under autocast (CUDA; the CPU in torch 2.x).
enum class ComputeDtype : uint8_t { kFp32, kBf16, kFp16 };

// `text` ("fp32", "bf16", "fp16") as a ComputeDtype. Throws UserError naming `name` (the flag,
// or the file and key), the text and the allowed values.
ComputeDtype ParseComputeDtype(std::string_view text, std::string_view name);
// The spelling ParseComputeDtype reads.
std::string_view ComputeDtypeName(ComputeDtype dtype);
// The scalar type of `dtype`'s products: at::kFloat, at::kBFloat16 or at::kHalf.
c10::ScalarType ScalarTypeOf(ComputeDtype dtype);

// The dtype this thread's autocast gives matrix products on `device_type`, or nullopt when
// autocast is off there. For code that casts by hand (custom autograd functions).
std::optional<c10::ScalarType> AutocastDtype(c10::DeviceType device_type);

// Whether this libtorch multiplies matrices in `dtype` under autocast on `device` (tried on a
// 2x2 product: true when it runs and gives `dtype`). Debian 12's libtorch 1.13, for one, has
// no fp16 matrix product on the CPU. Leaves this thread's autocast state as it found it.
bool AutocastComputesIn(c10::Device device, c10::ScalarType dtype);

class ComputePrecisionGuard {
 public:
  // Enables autocast for `device_type` (kCPU or kCUDA) with `dtype` (e.g. at::kBFloat16)
  // when `enabled`; with `enabled` false the guard does nothing.
  ComputePrecisionGuard(c10::DeviceType device_type, c10::ScalarType dtype, bool enabled);
  ~ComputePrecisionGuard();
  ComputePrecisionGuard(const ComputePrecisionGuard&) = delete;
  ComputePrecisionGuard& operator=(const ComputePrecisionGuard&) = delete;

 private:
  c10::DeviceType device_type_;
  bool active_;
  bool previous_enabled_ = false;
  c10::ScalarType previous_dtype_ = c10::ScalarType::Float;
};

}  // namespace conveyor

#endif  // CONVEYOR_DEVICE_COMPUTE_PRECISION_H_
