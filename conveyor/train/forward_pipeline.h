// Forward-only runs over a model's stages, for evaluation and generation: the program
// BuildForwardOnly makes for the model's placement (lowered), run by an Executor over this
// rank's stages, the model's own modules (their current weights), without autograd.
//
// The program and its executor are built the first time a micro-batch count is run and
// reused by every later run with that count; the micro-batches' shapes (samples, sequence
// length) may change from run to run (the executor sizes its buffers from each batch).
//
// Borrows the model (its stages and transport): the model must outlive the pipeline. Not
// thread-safe; one per rank.
#ifndef CONVEYOR_TRAIN_FORWARD_PIPELINE_H_
#define CONVEYOR_TRAIN_FORWARD_PIPELINE_H_

#include <map>
#include <memory>
#include <vector>

#include "conveyor/module/microbatch.h"
#include "conveyor/runtime/executor.h"
#include "conveyor/schedule/program.h"
#include "conveyor/train/pipeline_model.h"

namespace conveyor {

class ForwardPipeline {
 public:
  explicit ForwardPipeline(PipelineModel& model);

  // Runs `mbs` (indices 0 .. size - 1) through the forward-only program for their count: the
  // summed loss of this rank's last stages, and with `keep_outputs` their outputs by
  // micro-batch index (Executor::RunInference).
  // Collective: every rank runs the same count of micro-batches of the same shapes, in the
  // same order.
  Executor::Inference Run(const std::vector<MicroBatch>& mbs, bool keep_outputs = true);

  PipelineModel& model() const { return model_; }
  // How many micro-batch counts have had their program and executor built.
  int built_programs() const { return static_cast<int>(built_.size()); }

 private:
  struct Built {
    explicit Built(Program lowered) : program(std::move(lowered)) {}
    Program program;
    std::unique_ptr<Executor> executor;  // runs `program`, which it refers to
  };

  PipelineModel& model_;
  std::map<int, Built> built_;  // by micro-batch count; map nodes never move
};

// Makes `config` one of a run of forwards alone (generate, eval): it writes nothing of a
// training run (metrics, traces, checkpoints), and its layers are partitioned by parameters
// where they would be by profile (profiling times layers on training batches, which such a
// run has none of; any partition loads a checkpoint, whose tensors are whole, by name).
void ConfigureForwardOnly(TrainConfig& config);

}  // namespace conveyor

#endif  // CONVEYOR_TRAIN_FORWARD_PIPELINE_H_
