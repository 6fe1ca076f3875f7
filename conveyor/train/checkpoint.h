// Checkpoints: weights, optimizer state and the step, saved by every rank under global
// parameter names, so a run saved with one partition (pp = 4) resumes with another (2, 1).
//
// Layout: DIR/step-000120/meta.json (step, model config, the run that wrote it) and
// DIR/step-000120/rank-R.safetensors (that rank's parameters "param/<name>" and AdamW state
// "optim/<name>/exp_avg|exp_avg_sq"), and DIR/latest naming the newest step folder. A
// checkpoint is written into a temporary folder and renamed into place when every rank is
// done: a crash never leaves a half-written checkpoint under a final name.
//
// Data position and randomness need no state of their own: batches and sampling are
// functions of (seed, step), so the step is the position.
//
// Both functions are collective over the trainer's ranks.
#ifndef CONVEYOR_TRAIN_CHECKPOINT_H_
#define CONVEYOR_TRAIN_CHECKPOINT_H_

#include <string>

#include "conveyor/train/trainer.h"

namespace conveyor {

// Saves at trainer.step(); returns the folder written.
std::string SaveCheckpoint(const std::string& dir, Trainer& trainer, const TrainConfig& config,
                           Transport* world);

// `path` is a step folder or a DIR holding `latest`. Checks everything first (model config,
// every parameter and its state present with the right shape, files intact) and throws
// UserError naming the problem without changing the trainer; then loads and sets the step.
void LoadCheckpoint(const std::string& path, Trainer& trainer, const TrainConfig& config);

// The configuration a checkpoint's model was trained with (model sizes, data, seed); the
// other fields keep their defaults. For `conveyor generate`.
TrainConfig CheckpointConfig(const std::string& path);

}  // namespace conveyor

#endif  // CONVEYOR_TRAIN_CHECKPOINT_H_
