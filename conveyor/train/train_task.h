// A training task: a model (ModelTask) and its data. The trainer knows nothing else about
// models or corpora.
//
// Every method is deterministic in its arguments (seed, step): every rank, and every
// pipeline configuration, sees the same batches.
#ifndef CONVEYOR_TRAIN_TRAIN_TASK_H_
#define CONVEYOR_TRAIN_TRAIN_TASK_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "conveyor/module/microbatch.h"
#include "conveyor/train/model_task.h"

namespace conveyor {

class TrainTask {
 public:
  virtual ~TrainTask() = default;

  // The model this task trains; shared, so that a pipeline built from it may outlive the task.
  virtual std::shared_ptr<const ModelTask> model() const = 0;

  virtual Batch TrainBatch(int64_t step) const = 0;

  // What data-parallel replica `replica` of `replicas` trains on at `step`: its rows of the
  // global batch, as SliceBatch(TrainBatch(step), replica, replicas) gives them, and the
  // whole batch's counted targets (every replica divides its losses by them). The default
  // reads the whole batch; a task that can read just the rows overrides it.
  struct ReplicaBatch {
    Batch rows;
    double batch_targets = 1;
  };
  virtual ReplicaBatch TrainShare(int64_t step, int replica, int replicas) const {
    Batch batch = TrainBatch(step);
    const double targets = CountTargets(batch.targets);
    return {replicas > 1 ? SliceBatch(batch, replica, replicas) : std::move(batch), targets};
  }
  virtual std::vector<Batch> EvalBatches() const = 0;
  // Counted targets per training batch, for throughput (tokens or samples).
  virtual double TokensPerBatch() const = 0;

  // Whether evaluation reports an accuracy; then CountCorrect gives the correct predictions
  // in `logits` (the last stage's output) for `mb`.
  virtual bool has_accuracy() const { return false; }
  virtual double CountCorrect(const at::Tensor& logits, const MicroBatch& mb) const { return 0; }

  // The accuracy of always answering the most frequent class (-1 without accuracy).
  virtual double BaselineAccuracy() const { return -1; }

  // One line for the start of a run: the model, the corpus, the split.
  virtual std::string Describe() const = 0;
};

}  // namespace conveyor

#endif  // CONVEYOR_TRAIN_TRAIN_TASK_H_
