// The element-wise sum of a tensor over the ranks of a world: the reduction the training
// collectives (the step's loss, evaluation, measured costs, sampled tokens) are built on.
#ifndef CONVEYOR_TRAIN_SUM_OVER_RANKS_H_
#define CONVEYOR_TRAIN_SUM_OVER_RANKS_H_

#include <ATen/core/Tensor.h>

#include "conveyor/comm/transport.h"

namespace conveyor {

// Returns `t` summed element-wise over every rank of `world`; `t` itself (untouched) when
// `world` is null or has one rank. Otherwise `t` is reduced in place and returned.
// Collective: every rank passes a tensor of the same shape and dtype, in the same order.
at::Tensor SumOverRanks(Transport* world, at::Tensor t);

}  // namespace conveyor

#endif  // CONVEYOR_TRAIN_SUM_OVER_RANKS_H_
