// `conveyor train --tensorboard DIR`: rank 0's scalars of a run in a TensorBoard event file
// (common/event_file_writer.h), each step's written as the step ends, so a run killed at any
// point leaves a file TensorBoard reads up to its last step.
//
// The tags (docs/TRAINING.md, "TensorBoard"):
//   every step that was not skipped (at its step):
//     train/loss, train/lr, train/grad_norm (before clipping), train/tokens_per_s,
//     train/step_s, train/data_s (the wait for the batch); with loss scaling train/loss_scale;
//     each auxiliary loss as train/aux/<name>; with data parallelism dp/comm_s, dp/exposed_s;
//     for every MoE block moe/<block>/load_max and moe/<block>/load_mean (tokens an expert
//     received, summed over micro-batches and replicas), moe/<block>/imbalance (max / mean),
//     moe/<block>/tokens_dropped (when it dropped any), and moe/imbalance_max (the worst
//     block's);
//   a skipped step: train/skipped = 1 (and train/loss_scale with loss scaling);
//   each evaluation (at its step): eval/loss (when there was held-out data), eval/accuracy
//     (the classifier);
//   at the end of the run (at its last step), what conveyor measures over the whole run:
//     pipeline/bubble_measured, pipeline/bubble_predicted (the simulator's, from the measured
//     costs), pipeline/step_s_measured, pipeline/step_s_predicted,
//     pipeline/transfer_wait_fraction; memory/peak_tensor_mib_max and
//     memory/peak_resident_mib_max (the most over all ranks, MiB) and each rank's
//     memory/rank_<r>/peak_tensor_mib; with data parallelism dp/hidden_fraction.
#ifndef CONVEYOR_CLI_TENSORBOARD_LOG_H_
#define CONVEYOR_CLI_TENSORBOARD_LOG_H_

#include <memory>
#include <string>
#include <vector>

#include "conveyor/common/event_file_writer.h"
#include "conveyor/train/training_run.h"

namespace conveyor {

// The scalars of one step, of one evaluation, and of a whole run, as tagged above.
std::vector<TaggedScalar> StepScalars(const StepMetrics& step, bool loss_scaling);
std::vector<TaggedScalar> EvalScalars(const EvalMetrics& eval);
std::vector<TaggedScalar> RunScalars(const TrainingRun& run);

// A TrainingObserver that writes the scalars of each step and evaluation, then passes every
// call on to `next` (the progress lines), which must outlive it. Used by one rank's thread.
class TensorBoardLog : public TrainingObserver {
 public:
  // `dir` empty: writes nothing (the ranks other than 0, a run without --tensorboard).
  // Otherwise opens the event file in `dir` (creating it); UserError when it cannot.
  TensorBoardLog(const std::string& dir, TrainingObserver& next);

  void Started(Trainer& trainer) override;
  void Stepped(const StepMetrics& step, Trainer& trainer) override;
  void Evaluated(const EvalMetrics& eval, const TrainTask& task) override;
  void Checkpointed(const std::string& where) override;
  void Measured(const Trainer& trainer, const SimResult& predicted) override;

  // After RunTraining on rank 0: RunScalars(run) at its last step.
  void Finished(const TrainingRun& run);

 private:
  TrainingObserver& next_;
  std::unique_ptr<EventFileWriter> writer_;  // null: writes nothing
  bool loss_scaling_ = false;                // from Started on
};

}  // namespace conveyor

#endif  // CONVEYOR_CLI_TENSORBOARD_LOG_H_
