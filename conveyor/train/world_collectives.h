// The two collectives the training code is built on, for a world that may be null (one
// process): the element-wise sum of a tensor over the ranks (evaluation, measured costs) and
// the gather of one tensor per rank (the step's totals, per-rank metrics).
#ifndef CONVEYOR_TRAIN_WORLD_COLLECTIVES_H_
#define CONVEYOR_TRAIN_WORLD_COLLECTIVES_H_

#include <ATen/core/Tensor.h>

#include "conveyor/comm/transport.h"

namespace conveyor {

// Returns `t` summed element-wise over every rank of `world`; `t` itself (untouched) when
// `world` is null or has one rank. Otherwise `t` is reduced in place and returned.
// Collective: every rank passes a tensor of the same shape and dtype, in the same order.
at::Tensor SumOverRanks(Transport* world, at::Tensor t);

// Every rank's `t`, stacked in rank order: (ranks, ...t's shape); t.unsqueeze(0) when `world`
// is null. Collective: every rank passes a tensor of the same shape and dtype.
at::Tensor GatherOverRanks(Transport* world, const at::Tensor& t);

}  // namespace conveyor

#endif  // CONVEYOR_TRAIN_WORLD_COLLECTIVES_H_
