// The cost of each layer of a model, by which the trainer cuts the layers into stages
// (Partition): the choice of config.partition.
#ifndef CONVEYOR_TRAIN_LAYER_COSTS_H_
#define CONVEYOR_TRAIN_LAYER_COSTS_H_

#include <vector>

#include "conveyor/nn/layer.h"
#include "conveyor/train/model_task.h"
#include "conveyor/train/train_config.h"
#include "conveyor/train/train_task.h"

namespace conveyor {

// One cost per layer of `layers` (the model's layers, in order), as config.partition asks:
//   params   the layer's parameter count
//   flops    the model's forward FLOPs per layer (ModelTask::LayerFlops)
//   uniform  1 each
//   profile  the measured seconds of the layer's forward and backward on the first training
//            micro-batch of `data`, the fastest of three rounds; the gradients this leaves
//            on `layers` are dropped. Timings differ between calls and ranks. UserError
//            without `data` (a model with no training data to time it on).
std::vector<double> LayerCosts(const TrainConfig& config, const ModelTask& model,
                               const LayerList& layers, const TrainTask* data);

}  // namespace conveyor

#endif  // CONVEYOR_TRAIN_LAYER_COSTS_H_
