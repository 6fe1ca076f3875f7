// A training task: a model (as a list of layers) and its data. The trainer knows nothing
// else about models or corpora.
//
// Every method is deterministic in its arguments (seed, step): every rank, and every
// pipeline configuration, sees the same layers and the same batches.
#ifndef CONVEYOR_TRAIN_TASK_H_
#define CONVEYOR_TRAIN_TASK_H_

#include <string>
#include <vector>

#include "conveyor/module/microbatch.h"
#include "conveyor/nn/layer.h"
#include "conveyor/nn/tensor_parallel.h"

namespace conveyor {

class TrainTask {
 public:
  virtual ~TrainTask() = default;

  // The model's layers; with tp.size > 1 this rank's tensor-parallel shards of them
  // (tensor_parallel.h), whose collectives go through tp.group.
  virtual LayerList BuildLayers(const TensorParallel& tp) const = 0;
  // Relative compute of each layer for the partitioner (FLOPs of one sample's forward).
  virtual std::vector<double> LayerFlops() const = 0;

  virtual Batch TrainBatch(int64_t step) const = 0;
  virtual std::vector<Batch> EvalBatches() const = 0;
  // Counted targets per training batch, for throughput (tokens or samples).
  virtual double TokensPerBatch() const = 0;

  // Whether evaluation reports an accuracy; then CountCorrect gives the correct predictions
  // in `logits` (the last stage's output) for `mb`.
  virtual bool has_accuracy() const { return false; }
  virtual double CountCorrect(const at::Tensor& logits, const MicroBatch& mb) const { return 0; }

  // The accuracy of always answering the most frequent class (-1 without accuracy).
  virtual double BaselineAccuracy() const { return -1; }

  // One line for the start of a run: model size, corpus, split.
  virtual std::string Describe() const = 0;
};

}  // namespace conveyor

#endif  // CONVEYOR_TRAIN_TASK_H_
