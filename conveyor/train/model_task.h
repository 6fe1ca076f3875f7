// A model as conveyor runs it: the list of its layers and what they cost, and nothing about
// data. Evaluation-free uses (generation, loading a checkpoint) need only this; training
// needs a TrainTask (train_task.h), which holds one.
//
// Every method is deterministic in its arguments: every rank, and every pipeline
// configuration, sees the same layers (weights drawn from the seed, or read from a model
// folder), and a rank builds only the layers of its own stages: no rank ever holds the whole
// model.
#ifndef CONVEYOR_TRAIN_MODEL_TASK_H_
#define CONVEYOR_TRAIN_MODEL_TASK_H_

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "conveyor/nn/layer.h"
#include "conveyor/nn/parallel_context.h"
#include "conveyor/partition/partition.h"

namespace conveyor {

class ModelTask {
 public:
  virtual ~ModelTask() = default;

  // How many layers the model has (the partitioner cuts between them).
  virtual int num_layers() const = 0;
  // The model's layers of global index in [range.begin, range.end), and nothing of the
  // others, as they start training: their weights drawn from the seed or read from a model
  // folder (only those layers' tensors). Under model parallelism, this rank's part of them:
  // with parallel.tp.size > 1 its tensor-parallel shards (tensor_parallel.h), whose
  // collectives go through parallel.tp.group. Precondition:
  // 0 <= range.begin <= range.end <= num_layers().
  virtual LayerList BuildLayers(const ParallelContext& parallel, LayerRange range) const = 0;
  // Each layer's parameters, by global name, with their full (unsharded) shapes. The default
  // builds the layers one at a time; a model that knows them from its configuration says so
  // without building anything.
  virtual std::vector<ParameterShapes> LayerShapes() const;
  // Relative compute of each layer for the partitioner (FLOPs of one sample's forward).
  virtual std::vector<double> LayerFlops() const = 0;
  // One line: the architecture and its size ("gpt: 4 blocks, hidden 64, ...").
  virtual std::string Describe() const = 0;
  // The names of the auxiliary losses its layers may attach (auxiliary_loss.h; a router's
  // "load_balance"), the same on every rank whatever its stages: the trainer reports each
  // every step (StepMetrics::auxiliary_losses). None by default; a layer attaching a name not
  // listed here is an internal error at the end of its step.
  virtual std::vector<std::string> AuxiliaryLossNames() const { return {}; }
  // Its Mixture-of-Experts blocks (Layer::expert_block), by name (MoeMlp::prefix), with their
  // expert counts, in layer order, whatever the stages: the trainer reports each one's expert
  // load every step (StepMetrics::expert_load). None by default.
  virtual std::vector<std::pair<std::string, int>> ExpertBlocks() const { return {}; }
};

// How many numbers the model's parameters hold (those whose name `which` takes, when given),
// a tensor two layers share (a tied embedding) counted once.
int64_t CountParameters(const std::vector<ParameterShapes>& layers,
                        const std::function<bool(const std::string&)>& which = nullptr);

}  // namespace conveyor

#endif  // CONVEYOR_TRAIN_MODEL_TASK_H_
