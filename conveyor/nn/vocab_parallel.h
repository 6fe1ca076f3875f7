// The vocabulary-parallel ends of a tensor-parallel language model (tensor_parallel.h): the
// token embedding table and the LM head are split by vocabulary rows, rank t of p holding the
// r = ceil(V / p) tokens [t r, (t + 1) r), the ones past V zero padding when p does not divide
// V (tensor_parallel_split.h). The logits (..., r) are never gathered; the cross-entropy is
// computed from each rank's slice with three small collectives, the padded columns left out.
//
// With tp.size == 1 both functions are exactly their unsharded ATen counterparts. Otherwise
// they are collectives over tp.group (see tensor_parallel.h for the ordering rules).
#ifndef CONVEYOR_NN_VOCAB_PARALLEL_H_
#define CONVEYOR_NN_VOCAB_PARALLEL_H_

#include <ATen/core/Tensor.h>

#include "conveyor/nn/tensor_parallel.h"

namespace conveyor {

// ids (n, T) int64 in [0, vocab), weight (r, C) this rank's rows of the (V, C) table
// -> (n, T, C), the full lookup on every rank, or this rank's positions (n, T/p, C) of it under
// sequence parallelism: a rank looks up the ids of its rows, gives 0 for the others, and the
// ranks' results are summed (ReduceOutOfTensorParallel; backward: each rank's rows get the
// gradient of their ids). Throws UserError naming the range when an id is outside [0, vocab).
at::Tensor VocabParallelEmbedding(const at::Tensor& ids, const at::Tensor& weight,
                                  const TensorParallel& tp, int64_t vocab);

// logits (N, r) this rank's vocabulary columns (any floating dtype; the loss is computed in
// fp32), targets (N) in [0, vocab) or -1 (not counted) -> the cross-entropy summed over the
// counted targets, a scalar equal on every rank; padded columns take no part. The backward
// gives each rank (softmax - onehot) on its real columns and 0 on the padded ones. Throws
// UserError naming the range when a target is outside [-1, vocab).
at::Tensor VocabParallelCrossEntropySum(const at::Tensor& half_or_float_logits,
                                        const at::Tensor& targets, const TensorParallel& tp,
                                        int64_t vocab);

}  // namespace conveyor

#endif  // CONVEYOR_NN_VOCAB_PARALLEL_H_
