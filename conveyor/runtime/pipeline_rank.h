// One rank of a pipeline: the stages the layout puts on it and the executor that runs them.
//
// Owns its stages (built by `make_module` for each stage index on this rank) and runs one
// training step at a time. The step's micro-batches must be identical on every rank.
#ifndef CONVEYOR_RUNTIME_PIPELINE_RANK_H_
#define CONVEYOR_RUNTIME_PIPELINE_RANK_H_

#include <functional>
#include <map>
#include <memory>

#include "conveyor/runtime/executor.h"

namespace conveyor {

using MakeStageModule = std::function<std::unique_ptr<StageModule>(int stage)>;

class PipelineRank {
 public:
  // `program` must be lowered; it is copied. `transport` may be null for one rank.
  PipelineRank(const Program& program, int rank, Transport* transport,
               const MakeStageModule& make_module,
               at::TensorOptions activation_options);

  // Runs one step (forward and backward of every micro-batch); gradients accumulate into
  // the parameters' .grad. Returns the sum of this rank's last-stage scaled losses.
  double Step(const std::vector<MicroBatch>& microbatches);

  const Program& program() const { return program_; }
  int rank() const { return rank_; }
  // This rank's stages by stage index.
  const std::map<int, std::unique_ptr<Stage>>& stages() const { return stages_; }
  Executor& executor() { return *executor_; }
  // Parameters of every stage on this rank, under their global names. A name may appear
  // twice (DualPipe's two copies of a model part on one rank).
  NamedTensors NamedParameters() const;

 private:
  Program program_;
  int rank_;
  std::map<int, std::unique_ptr<Stage>> stages_;
  std::unique_ptr<Executor> executor_;
};

}  // namespace conveyor

#endif  // CONVEYOR_RUNTIME_PIPELINE_RANK_H_
