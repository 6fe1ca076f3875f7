#include "conveyor/train/layer_costs.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <limits>

#include "conveyor/common/error.h"

namespace conveyor {
namespace {

// Forward + backward seconds of each layer on the first training micro-batch, built one at
// a time; each layer's input is the output of the one before.
std::vector<double> ProfileLayers(const TrainTask& task, int microbatches) {
  const ModelTask& model = *task.model();
  const MicroBatch mb = SplitBatch(task.TrainBatch(0), microbatches)[0];
  std::vector<double> seconds(model.num_layers(), std::numeric_limits<double>::infinity());
  at::Tensor x = mb.inputs;
  for (int l = 0; l < model.num_layers(); ++l) {
    const std::shared_ptr<Layer> layer = model.BuildLayers({}, {l, l + 1}).at(0);
    at::Tensor out;
    for (int round = 0; round < 3; ++round) {  // the fastest of three: less noise
      const at::Tensor in = l == 0 ? x : x.detach().requires_grad_(true);
      const auto start = std::chrono::steady_clock::now();
      out = layer->Forward(in, mb);
      at::Tensor loss = layer->has_loss() ? layer->LossSum(out, mb) : out.sum();
      if (loss.requires_grad()) loss.backward();  // not for frozen weights alone (LoRA's)
      seconds[l] =
          std::min(seconds[l],
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    x = out.detach();
  }
  return seconds;
}

}  // namespace

std::vector<double> LayerCosts(const TrainConfig& config, const ModelTask& model,
                               const std::vector<ParameterShapes>& shapes, const TrainTask* data) {
  switch (config.partition) {
    case PartitionBy::kParams:
      // Every expert's parameters would weigh a sparse layer E / k times its work.
      if (config.model.experts > 0) return model.LayerFlops();
      break;
    case PartitionBy::kFlops:
      return model.LayerFlops();
    case PartitionBy::kProfile:
      CONVEYOR_CHECK(data != nullptr)
          << "--partition profile times the layers on training data, and there is none here";
      return ProfileLayers(*data, config.microbatches);
    case PartitionBy::kUniform:
      break;
  }
  std::vector<double> costs;
  for (const ParameterShapes& layer : shapes) {
    costs.push_back(config.partition == PartitionBy::kUniform
                        ? 1.0
                        : static_cast<double>(CountParameters({layer})));
  }
  return costs;
}

}  // namespace conveyor
