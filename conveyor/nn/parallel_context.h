// The groups a model's layers communicate over, one per kind of model parallelism, handed to
// every layer builder (ModelTask::BuildLayers) by the mesh's owner (PipelineModel). A layer
// takes the part it needs: the attention and MLP blocks the tensor-parallel group; a
// Mixture-of-Experts layer will take its expert group here, and attention under context
// parallelism its context group, each a field of its own beside tp.
//
// A plain value; the groups it points to are not owned and must outlive every layer built
// with it.
#ifndef CONVEYOR_NN_PARALLEL_CONTEXT_H_
#define CONVEYOR_NN_PARALLEL_CONTEXT_H_

#include "conveyor/nn/tensor_parallel.h"

namespace conveyor {

struct ParallelContext {
  TensorParallel tp;  // size 1 (the default): no tensor parallelism
};

}  // namespace conveyor

#endif  // CONVEYOR_NN_PARALLEL_CONTEXT_H_
