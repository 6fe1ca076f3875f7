// The vocabulary-parallel ends of a tensor-parallel language model (tensor_parallel.h): the
// token embedding table and the LM head are split by vocabulary rows, rank t of p holding the
// V / p tokens [t V / p, (t + 1) V / p). The logits (..., V / p) are never gathered; the
// cross-entropy is computed from each rank's slice with three small collectives.
//
// With tp.size == 1 both functions are exactly their unsharded ATen counterparts. Otherwise
// they are collectives over tp.group (see tensor_parallel.h for the ordering rules).
#ifndef CONVEYOR_NN_VOCAB_PARALLEL_H_
#define CONVEYOR_NN_VOCAB_PARALLEL_H_

#include <ATen/core/Tensor.h>

#include "conveyor/nn/tensor_parallel.h"

namespace conveyor {

// ids (...) int64 in [0, V), weight (V / p, C) this rank's rows of the (V, C) table
// -> (..., C), the full lookup on every rank: a rank looks up the ids of its rows, gives 0 for
// the others, and the ranks' results are summed (backward: each rank's rows get the gradient
// of their ids). Throws UserError naming the range when an id is outside [0, V).
at::Tensor VocabParallelEmbedding(const at::Tensor& ids, const at::Tensor& weight,
                                  const TensorParallel& tp);

// logits (N, V / p) this rank's vocabulary columns (any floating dtype; the loss is computed
// in fp32), targets (N) in [0, V) or -1 (not counted) -> the cross-entropy summed over the
// counted targets, a scalar equal on every rank. The
// backward gives each rank (softmax - onehot) on its columns. Throws UserError naming the
// range when a target is outside [-1, V).
at::Tensor VocabParallelCrossEntropySum(const at::Tensor& half_or_float_logits,
                                        const at::Tensor& targets, const TensorParallel& tp);

}  // namespace conveyor

#endif  // CONVEYOR_NN_VOCAB_PARALLEL_H_
