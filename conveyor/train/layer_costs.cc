#include "conveyor/train/layer_costs.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <limits>

#include "conveyor/common/error.h"

namespace conveyor {
namespace {

// Forward + backward seconds of each layer on the first training micro-batch.
std::vector<double> ProfileLayers(const TrainTask& task, const LayerList& layers,
                                  int microbatches) {
  const MicroBatch mb = SplitBatch(task.TrainBatch(0), microbatches)[0];
  std::vector<double> seconds(layers.size(), std::numeric_limits<double>::infinity());
  for (int round = 0; round < 3; ++round) {  // the fastest of three: less noise
    at::Tensor x = mb.inputs;
    for (size_t l = 0; l < layers.size(); ++l) {
      const at::Tensor in = l == 0 ? x : x.detach().requires_grad_(true);
      const auto start = std::chrono::steady_clock::now();
      at::Tensor out = layers[l]->Forward(in, mb);
      at::Tensor loss = layers[l]->has_loss() ? layers[l]->LossSum(out, mb) : out.sum();
      loss.backward();
      seconds[l] =
          std::min(seconds[l],
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      x = out.detach();
    }
  }
  for (const auto& layer : layers) {
    for (const auto& [name, p] : layer->NamedParameters()) p.mutable_grad() = at::Tensor();
  }
  return seconds;
}

}  // namespace

std::vector<double> LayerCosts(const TrainConfig& config, const ModelTask& model,
                               const LayerList& layers, const TrainTask* data) {
  switch (config.partition) {
    case PartitionBy::kFlops:
      return model.LayerFlops();
    case PartitionBy::kProfile:
      CONVEYOR_CHECK(data != nullptr)
          << "--partition profile times the layers on training data, and there is none here";
      return ProfileLayers(*data, layers, config.microbatches);
    case PartitionBy::kParams:
    case PartitionBy::kUniform:
      break;
  }
  std::vector<double> costs;
  for (const auto& layer : layers) {
    double params = 0;
    for (const auto& [name, p] : layer->NamedParameters()) params += static_cast<double>(p.numel());
    costs.push_back(config.partition == PartitionBy::kUniform ? 1.0 : params);
  }
  return costs;
}

}  // namespace conveyor
