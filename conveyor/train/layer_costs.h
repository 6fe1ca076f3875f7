// The cost of each layer of a model, by which the trainer cuts the layers into stages
// (Partition): the choice of config.partition.
#ifndef CONVEYOR_TRAIN_LAYER_COSTS_H_
#define CONVEYOR_TRAIN_LAYER_COSTS_H_

#include <vector>

#include "conveyor/train/model_task.h"
#include "conveyor/train/train_config.h"
#include "conveyor/train/train_task.h"

namespace conveyor {

// One cost per layer of `model`, as config.partition asks:
//   params   the layer's parameter count (`shapes`: the model's ModelTask::LayerShapes); for
//            a Mixture-of-Experts model its FLOPs instead (every expert's parameters would
//            weigh a sparse layer E / k times the work a token does there)
//   flops    the model's forward FLOPs per layer (ModelTask::LayerFlops)
//   uniform  1 each
//   profile  the measured seconds of the layer's forward and backward on the first training
//            micro-batch of `data`, the fastest of three rounds. The layers are built one at a
//            time, unsharded, and dropped after their timing: the caller holds at most one
//            layer more than before. Timings differ between calls and ranks. UserError
//            without `data` (a model with no training data to time it on).
std::vector<double> LayerCosts(const TrainConfig& config, const ModelTask& model,
                               const std::vector<ParameterShapes>& shapes, const TrainTask* data);

}  // namespace conveyor

#endif  // CONVEYOR_TRAIN_LAYER_COSTS_H_
