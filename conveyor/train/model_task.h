// A model as conveyor runs it: the list of its layers and what they cost, and nothing about
// data. Evaluation-free uses (generation, loading a checkpoint) need only this; training
// needs a TrainTask (train_task.h), which holds one.
//
// Every method is deterministic in its arguments: every rank, and every pipeline
// configuration, sees the same layers (weights drawn from the seed, or read from a model
// folder).
#ifndef CONVEYOR_TRAIN_MODEL_TASK_H_
#define CONVEYOR_TRAIN_MODEL_TASK_H_

#include <string>
#include <vector>

#include "conveyor/nn/layer.h"
#include "conveyor/nn/tensor_parallel.h"

namespace conveyor {

class ModelTask {
 public:
  virtual ~ModelTask() = default;

  // The model's layers; with tp.size > 1 this rank's tensor-parallel shards of them
  // (tensor_parallel.h), whose collectives go through tp.group.
  virtual LayerList BuildLayers(const TensorParallel& tp) const = 0;
  // Relative compute of each layer for the partitioner (FLOPs of one sample's forward).
  virtual std::vector<double> LayerFlops() const = 0;
  // One line: the architecture and its size ("gpt: 4 blocks, hidden 64, ...").
  virtual std::string Describe() const = 0;
  // Overwrites `params` (parameters of BuildLayers(tp)'s layers, by global name, as this rank
  // holds them) with the model's initial weights where those come from outside (a Hugging
  // Face folder), reading only those tensors; the default keeps the weights BuildLayers drew.
  virtual void LoadInitialWeights(const NamedTensors& params, const TensorParallel& tp) const {}
};

}  // namespace conveyor

#endif  // CONVEYOR_TRAIN_MODEL_TASK_H_
