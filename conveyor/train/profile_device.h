// Where and how `conveyor profile` (layer_profile.h) computes: the device and the dtype of
// its products, the clock it reads after waiting for the device, and the layers it builds
// there one at a time. Shared by the layer timings and the capacity measurement
// (device_capacity.h).
//
// Thread-safety: free functions; a Precision guards its own thread's forwards only.
#ifndef CONVEYOR_TRAIN_PROFILE_DEVICE_H_
#define CONVEYOR_TRAIN_PROFILE_DEVICE_H_

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <chrono>
#include <memory>

#include "conveyor/device/compute_precision.h"
#include "conveyor/nn/layer.h"
#include "conveyor/nn/tensor_parallel.h"
#include "conveyor/train/model_task.h"

namespace conveyor {

// Where the profile computes: the device, and the dtype of its products (autocast unless
// fp32), as a rank's stages compute (runtime/stage.h).
struct ProfileDevice {
  c10::Device device;
  c10::ScalarType dtype;
};

// Runs the forward passes of its scope in `on`'s dtype.
class Precision {
 public:
  explicit Precision(const ProfileDevice& on)
      : guard_(on.device.type(), on.dtype, on.dtype != at::kFloat) {}

 private:
  ComputePrecisionGuard guard_;
};

using ProfileClock = std::chrono::steady_clock;

// Now, once the work this thread gave `device` so far has finished.
ProfileClock::time_point Now(const c10::Device& device);
// Seconds from `start` until the work given `device` so far has finished.
double Since(const c10::Device& device, ProfileClock::time_point start);

// Layer `index` of `model`, its weights on `device`: the whole layer, or with `tp` one rank's
// shard of it.
std::shared_ptr<Layer> LayerOn(const ModelTask& model, int index, const c10::Device& device,
                               const TensorParallel& tp = {});

// Forwards of `layer` on `x` without autograd, `iterations` times, then a wait for the
// device: the unit of work the capacity timings repeat. No autograd: its engine refuses to
// run in a forked child once it has started threads (a CUDA libtorch starts them).
void RunForwards(Layer& layer, const at::Tensor& x, const MicroBatch& mb, int iterations,
                 const ProfileDevice& on);

}  // namespace conveyor

#endif  // CONVEYOR_TRAIN_PROFILE_DEVICE_H_
