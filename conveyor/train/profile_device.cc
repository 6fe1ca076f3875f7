#include "conveyor/train/profile_device.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include "conveyor/device/compute_device.h"
#include "conveyor/device/stream_order.h"

namespace conveyor {

ProfileClock::time_point Now(const c10::Device& device) {
  SynchronizeCurrentStream(device);
  return ProfileClock::now();
}

double Since(const c10::Device& device, ProfileClock::time_point start) {
  return std::chrono::duration<double>(Now(device) - start).count();
}

std::shared_ptr<Layer> LayerOn(const ModelTask& model, int index, const c10::Device& device,
                               const TensorParallel& tp) {
  std::shared_ptr<Layer> layer = model.BuildLayers({tp}, {index, index + 1}).at(0);
  MoveParameters(layer->NamedParameters(), device);
  return layer;
}

void RunForwards(Layer& layer, const at::Tensor& x, const MicroBatch& mb, int iterations,
                 const ProfileDevice& on) {
  at::NoGradGuard no_grad;
  const Precision precision(on);
  for (int i = 0; i < iterations; ++i) (layer.Forward(x, mb) * 2).sum();
  SynchronizeCurrentStream(on.device);
}

}  // namespace conveyor
