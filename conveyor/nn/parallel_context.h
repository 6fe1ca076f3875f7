// The groups a model's layers communicate over, one per kind of model parallelism, handed to
// every layer builder (ModelTask::BuildLayers) by the mesh's owner (PipelineModel). A layer
// takes the part it needs: the attention and MLP blocks the tensor-parallel group, a
// Mixture-of-Experts block the expert-parallel group, attention and the sequence's ends the
// context-parallel group.
//
// A plain value; the groups it points to are not owned and must outlive every layer built
// with it.
#ifndef CONVEYOR_NN_PARALLEL_CONTEXT_H_
#define CONVEYOR_NN_PARALLEL_CONTEXT_H_

#include "conveyor/comm/overlap_lane.h"
#include "conveyor/nn/context_parallel.h"
#include "conveyor/nn/tensor_parallel.h"

namespace conveyor {

// The ranks among which each Mixture-of-Experts block's experts are divided (moe_mlp.h):
// rank r of `size` holds experts [r E / size, (r + 1) E / size), and tokens travel to them
// and back by all-to-all over `group` (null when size == 1; not owned).
struct ExpertParallel {
  int size = 1;
  int rank = 0;
  Transport* group = nullptr;
  // The same ranks' group for the forward halves of overlapped pairs (comm/overlap_lane.h);
  // null: `group` serves both lanes (no overlap).
  Transport* overlap_group = nullptr;
  LaneGroups groups() const { return {group, overlap_group}; }
};

struct ParallelContext {
  TensorParallel tp;   // size 1 (the default): no tensor parallelism
  ExpertParallel ep;   // size 1 (the default): every expert on every rank
  ContextParallel cp;  // size 1 (the default): whole sequences
};

}  // namespace conveyor

#endif  // CONVEYOR_NN_PARALLEL_CONTEXT_H_
