#include "conveyor/device/compute_device.h"

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <ATen/core/grad_mode.h>
#include <c10/core/DeviceGuard.h>
#include <torch/cuda.h>

#include <cstdlib>
#include <string>

#include "conveyor/common/error.h"
#include "conveyor/common/spellings.h"

namespace conveyor {
namespace {

constexpr Spellings<DeviceKind, 3> kDeviceKinds = {{
    {DeviceKind::kAuto, "auto"},
    {DeviceKind::kCpu, "cpu"},
    {DeviceKind::kCuda, "cuda"},
}};

}  // namespace

DeviceKind ParseDeviceKind(std::string_view text, std::string_view name) {
  return ParseSpelling(kDeviceKinds, text, name);
}

std::string_view DeviceKindName(DeviceKind device) { return SpellingOf(kDeviceKinds, device); }

int VisibleGpus() {
  // torch::cuda's count, not the CUDA hooks' (their method names changed across 2.x).
  return static_cast<int>(torch::cuda::device_count());
}

void MoveParameters(const std::vector<std::pair<std::string, at::Tensor>>& params,
                    const c10::Device& device) {
  for (const auto& [name, p] : params) {
    if (p.device() != device) p.set_data(p.data().to(device));
  }
}

bool UsesCuda(DeviceKind kind) {
  return kind == DeviceKind::kCuda || (kind == DeviceKind::kAuto && VisibleGpus() > 0);
}

c10::Device ComputeDevice(DeviceKind kind, int rank, int local_rank) {
  if (!UsesCuda(kind)) return c10::Device(c10::DeviceType::CPU);
  CONVEYOR_CHECK(at::globalContext().hasCUDA())
      << "rank " << rank
      << ": --device cuda, but this libtorch was built without CUDA (build conveyor against a "
         "CUDA libtorch, see the README's GPU section, or use --device cpu)";
  const int gpus = VisibleGpus();
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  CONVEYOR_CHECK(gpus > 0) << "rank " << rank << ": --device cuda, but no GPU is visible"
                           << (visible != nullptr
                                   ? std::string(" (CUDA_VISIBLE_DEVICES=") + visible + ")"
                                   : std::string())
                           << "; use --device cpu or auto";
  CONVEYOR_CHECK(local_rank >= 0) << "rank " << rank << ": local rank " << local_rank;
  return c10::Device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(local_rank % gpus));
}

void WarmUpDevice(const c10::Device& device) {
  c10::OptionalDeviceGuard on_device;
  if (device.is_cuda()) on_device.reset_device(device);
  at::NoGradGuard no_grad;
  const at::Tensor a = at::ones({64, 64}, at::TensorOptions(device));
  at::Tensor product = at::matmul(a, a);
  if (device.is_cuda()) {  // cuBLASLt's half-precision path too
    const at::Tensor half = a.to(at::kBFloat16);
    product = product + at::matmul(half, half).to(at::kFloat);
  }
  CONVEYOR_ASSERT(product.sum().item<double>() > 0) << "a product on " << device << " gave nothing";
}

}  // namespace conveyor
