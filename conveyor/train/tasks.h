// The tasks `conveyor train` knows: a byte-level GPT on a corpus (next-byte prediction), and
// an encoder classifier telling which fortune file a text comes from.
#ifndef CONVEYOR_TRAIN_TASKS_H_
#define CONVEYOR_TRAIN_TASKS_H_

#include <memory>

#include "conveyor/train/task.h"
#include "conveyor/train/train_config.h"

namespace conveyor {

// Loads the corpus config.data names ("fortunes" or a path) and builds config.model's task.
// Throws UserError for a missing corpus or an impossible model configuration.
std::shared_ptr<TrainTask> MakeTask(const TrainConfig& config);

}  // namespace conveyor

#endif  // CONVEYOR_TRAIN_TASKS_H_
