// Differences between the libtorch versions conveyor builds against (Debian 12's 1.13,
// Debian 13's 2.6, a pip PyTorch 2.x): autocast, events, allocators and kernels here; c10d's
// in comm/c10d_compat.h and comm/'s sources.
//
// Thread-safety: the functions are pure.
#ifndef CONVEYOR_DEVICE_TORCH_COMPAT_H_
#define CONVEYOR_DEVICE_TORCH_COMPAT_H_

#include <ATen/autocast_mode.h>
#include <ATen/core/Tensor.h>
#include <c10/core/Event.h>
#include <torch/version.h>

#include <optional>
#include <vector>

#if TORCH_VERSION_MAJOR >= 2
#include <ATen/ops/scaled_dot_product_attention.h>
#endif
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
#include <ATen/ops/_foreach_copy.h>
#include <ATen/ops/_fused_adamw.h>
#include <ATen/ops/full.h>
#endif

namespace conveyor {

// Autocast state of this thread for `device_type` (kCPU or kCUDA; others are CUDA's before
// 2.4). libtorch 2.4 and later take the device type; before, separate CPU and GPU (CUDA)
// functions.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
inline bool IsAutocastEnabled(c10::DeviceType t) { return at::autocast::is_autocast_enabled(t); }
inline void SetAutocastEnabled(c10::DeviceType t, bool on) {
  at::autocast::set_autocast_enabled(t, on);
}
inline c10::ScalarType GetAutocastDtype(c10::DeviceType t) {
  return at::autocast::get_autocast_dtype(t);
}
inline void SetAutocastDtype(c10::DeviceType t, c10::ScalarType d) {
  at::autocast::set_autocast_dtype(t, d);
}
#else
inline bool IsAutocastEnabled(c10::DeviceType t) {
  return t == c10::DeviceType::CPU ? at::autocast::is_cpu_enabled() : at::autocast::is_enabled();
}
inline void SetAutocastEnabled(c10::DeviceType t, bool on) {
  if (t == c10::DeviceType::CPU) {
    at::autocast::set_cpu_enabled(on);
  } else {
    at::autocast::set_enabled(on);
  }
}
inline c10::ScalarType GetAutocastDtype(c10::DeviceType t) {
  return t == c10::DeviceType::CPU ? at::autocast::get_autocast_cpu_dtype()
                                   : at::autocast::get_autocast_gpu_dtype();
}
inline void SetAutocastDtype(c10::DeviceType t, c10::ScalarType d) {
  if (t == c10::DeviceType::CPU) {
    at::autocast::set_autocast_cpu_dtype(d);
  } else {
    at::autocast::set_autocast_gpu_dtype(d);
  }
}
#endif

// c10::Allocator (memory_tracker's counting allocator): allocate lost its const in 2.3, and
// copy_data became a pure virtual; default_copy_data came with it.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3)
#define CONVEYOR_ALLOCATE_CONST
#else
#define CONVEYOR_ALLOCATE_CONST const
#endif

// Device events that measure time: c10::Event gained elapsedTime and synchronize in 2.x (2.6
// has them); 1.13 has neither, and its Debian build has no CUDA to time anyway.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 6)
inline constexpr bool kHasEventTiming = true;
// Milliseconds from `from` to `to`, both recorded with timing and completed.
inline double EventMilliseconds(const c10::Event& from, const c10::Event& to) {
  return from.elapsedTime(to);
}
inline void SynchronizeEvent(const c10::Event& event) { event.synchronize(); }
#else
inline constexpr bool kHasEventTiming = false;
inline double EventMilliseconds(const c10::Event&, const c10::Event&) { return 0; }
inline void SynchronizeEvent(const c10::Event&) {}
#endif

// Fused attention: at::scaled_dot_product_attention came with libtorch 2.0 (flash and
// memory-efficient kernels on GPUs, a fused kernel on CPUs from 2.2; each keeps no (T, T)
// scores for backward). 1.13 has none: callers take their own path where kHasFusedAttention
// is false.
#if TORCH_VERSION_MAJOR >= 2
inline constexpr bool kHasFusedAttention = true;
// softmax(q k^T / sqrt(d), causal if asked) v for q, k, v (n, H, T, d), no dropout; with
// `allowed` ((n, 1, T, T) bool, true = query i may attend key j; then causal is false) only
// those keys.
inline at::Tensor FusedAttention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                 bool causal, const at::Tensor& allowed = {}) {
  return at::scaled_dot_product_attention(
      q, k, v, allowed.defined() ? std::optional<at::Tensor>(allowed) : std::nullopt,
      /*dropout_p=*/0.0, causal);
}
#else
inline constexpr bool kHasFusedAttention = false;
inline at::Tensor FusedAttention(const at::Tensor&, const at::Tensor&, const at::Tensor&, bool,
                                 const at::Tensor& = {}) {
  return {};
}
#endif

// Fused AdamW: at::_fused_adamw_ (GPUs from libtorch 2.0, CPUs from 2.4; used from 2.4).
// Updates params, exp_avgs and exp_avg_sqs in place at update `step` (from 1) with decoupled
// weight decay `weight_decay` for every tensor; all lists of one length, on one device, of one
// dtype. The kernel leaves the tensors' version counters as they were (2.15): they are bumped
// here, as every other in-place update bumps them (what nn/weight_cast.h's cache reads).
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
inline constexpr bool kHasFusedAdamW = true;
inline void FusedAdamW(at::TensorList params, at::TensorList grads, at::TensorList exp_avgs,
                       at::TensorList exp_avg_sqs, double lr, double beta1, double beta2,
                       double weight_decay, double eps, int64_t step) {
  // The kernel reads each tensor's step from a float tensor on its device; one serves all.
  const at::Tensor count =
      at::full({}, static_cast<double>(step), params.front().options().dtype(at::kFloat));
  const std::vector<at::Tensor> steps(params.size(), count);
  at::_fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, /*max_exp_avg_sqs=*/{}, steps, lr, beta1,
                    beta2, weight_decay, eps, /*amsgrad=*/false, /*maximize=*/false);
  for (at::TensorList changed : {params, exp_avgs, exp_avg_sqs}) {
    for (const at::Tensor& t : changed) t.unsafeGetTensorImpl()->bump_version();
  }
}
#else
inline constexpr bool kHasFusedAdamW = false;
inline void FusedAdamW(at::TensorList, at::TensorList, at::TensorList, at::TensorList, double,
                       double, double, double, double, int64_t) {}
#endif

// dst[i].copy_(src[i]) for every i (lists of one length, pairs of one shape): one
// multi-tensor call (at::_foreach_copy_, used from libtorch 2.4), else a copy a pair.
inline void CopyEach(at::TensorList dst, at::TensorList src) {
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
  if (!dst.empty()) at::_foreach_copy_(dst, src);
#else
  for (size_t i = 0; i < dst.size(); ++i) dst[i].copy_(src[i]);
#endif
}

}  // namespace conveyor

#endif  // CONVEYOR_DEVICE_TORCH_COMPAT_H_
