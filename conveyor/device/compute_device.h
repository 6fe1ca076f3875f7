// The device a rank computes on, from --device and the rank's place on its machine.
//
// kCpu: the CPU. kCuda: cuda:(local_rank mod the number of visible GPUs), so that ranks
// beyond the GPU count (ranks as threads of one process, or more processes than GPUs) share
// them round-robin. kAuto: kCuda when this libtorch has CUDA and a GPU is visible, else kCpu.
//
// Thread-safety: the functions may be called from any thread.
#ifndef CONVEYOR_DEVICE_COMPUTE_DEVICE_H_
#define CONVEYOR_DEVICE_COMPUTE_DEVICE_H_

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace conveyor {

// Where each rank computes (--device): CUDA when this libtorch has it and a GPU is present,
// else the CPU (auto); the CPU; or CUDA, rank r on cuda:(local rank r mod the GPU count).
enum class DeviceKind : uint8_t { kAuto, kCpu, kCuda };

// `text` ("auto", "cpu", "cuda") as a DeviceKind. Throws UserError naming `name` (the flag,
// or the file and key), the text and the allowed values.
DeviceKind ParseDeviceKind(std::string_view text, std::string_view name);
// The spelling ParseDeviceKind reads.
std::string_view DeviceKindName(DeviceKind device);

// GPUs this process sees through libtorch (0 when libtorch was built without CUDA).
int VisibleGpus();

// `kind` resolved for the rank `rank` (named in errors) whose index among the ranks of its
// machine is `local_rank`. Throws UserError for kCuda when this libtorch lacks CUDA or no GPU
// is visible, naming the rank and why.
c10::Device ComputeDevice(DeviceKind kind, int rank, int local_rank);

// Moves each parameter's data (NamedTensors, module/stage_module.h) to `device` in place
// (Tensor::set_data), so that every handle a layer keeps on the parameter sees it there;
// requires_grad is kept. Call before any forward and before an optimizer holds state for them.
void MoveParameters(const std::vector<std::pair<std::string, at::Tensor>>& params,
                    const c10::Device& device);

// Makes `device` ready for the first step, waiting for it: on a GPU its context and the
// calling thread's BLAS handle and workspace (small fp32 and bf16 products); on the CPU the
// BLAS library's threads (a small product). Per thread: libtorch keeps a BLAS handle a thread.
void WarmUpDevice(const c10::Device& device);

// Whether `kind` resolves to CUDA in this process (kAuto with a visible GPU, or kCuda).
bool UsesCuda(DeviceKind kind);

}  // namespace conveyor

#endif  // CONVEYOR_DEVICE_COMPUTE_DEVICE_H_
