// The tasks `conveyor train` knows: a byte-level language model (GPT or Llama) on a corpus
// (next-byte prediction), and an encoder classifier telling which fortune file a text comes
// from.
#ifndef CONVEYOR_TRAIN_BUILTIN_TASKS_H_
#define CONVEYOR_TRAIN_BUILTIN_TASKS_H_

#include <memory>

#include "conveyor/train/model_task.h"
#include "conveyor/train/train_config.h"
#include "conveyor/train/train_task.h"

namespace conveyor {

// config.model's model alone (its architecture's MakeModel, model_registry.h), from the
// configuration (no corpus is read). Throws UserError for an impossible model configuration.
std::shared_ptr<const ModelTask> MakeModelTask(const TrainConfig& config);

// Loads the corpus config.data names ("fortunes" or a path) and builds config.model's task.
// Throws UserError for a missing corpus or an impossible model configuration.
std::shared_ptr<TrainTask> MakeTask(const TrainConfig& config);

}  // namespace conveyor

#endif  // CONVEYOR_TRAIN_BUILTIN_TASKS_H_
