// The cost of each layer of a model, by which the trainer cuts the layers into stages
// (Partition): the choice of config.partition.
#ifndef CONVEYOR_TRAIN_LAYER_COSTS_H_
#define CONVEYOR_TRAIN_LAYER_COSTS_H_

#include <vector>

#include "conveyor/nn/layer.h"
#include "conveyor/train/task.h"
#include "conveyor/train/train_config.h"

namespace conveyor {

// One cost per layer of `layers` (the task's layers, in order), as config.partition asks:
//   params   the layer's parameter count
//   flops    the task's forward FLOPs per layer (TrainTask::LayerFlops)
//   uniform  1 each
//   profile  the measured seconds of the layer's forward and backward on the first training
//            micro-batch, the fastest of three rounds; the gradients this leaves on `layers`
//            are dropped. Timings differ between calls and ranks.
std::vector<double> LayerCosts(const TrainConfig& config, const TrainTask& task,
                               const LayerList& layers);

}  // namespace conveyor

#endif  // CONVEYOR_TRAIN_LAYER_COSTS_H_
