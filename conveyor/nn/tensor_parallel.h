// Megatron-style tensor parallelism (TP) for the model zoo: the TP group a model is built for,
// the two conjugate autograd operators at the edges of a TP region, and how each parameter is
// split across the TP ranks (to count, gather and shard parameters and their gradients).
//
// The p ranks of a TP group run the same layers on the same activations (n, T, C), which are
// replicated. Inside a block the attention heads and the MLP's hidden units are split:
//   column-parallel linear: weight rows split. Its replicated input enters through
//     CopyToTensorParallel (identity; the backward sums the ranks' partial input gradients);
//     its output is this rank's slice of the features.
//   row-parallel linear: weight columns split. It takes the sliced features and
//     ReduceFromTensorParallel sums the ranks' partial outputs (identity backward); the
//     replicated bias is added after the sum (RowParallelLinear).
// Weight gradients stay local (Linear, so they can still be deferred); only the input
// gradients and the partial outputs cross the group.
//
// Thread-safety and ordering: the operators run collectives on tp.group, in forward and in
// backward, so every TP rank must run the same forwards and backwards in the same order, and
// only the thread running the module's forward/backward (the autograd engine's, for backward)
// may use the group while it runs (transport.h: one thread at a time).
#ifndef CONVEYOR_NN_TENSOR_PARALLEL_H_
#define CONVEYOR_NN_TENSOR_PARALLEL_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "conveyor/nn/parameter_spec.h"

namespace conveyor {

class Transport;

// The TP group a model is built for. With size 1 (the default) the model is the unsharded
// one and never communicates.
struct TensorParallel {
  int size = 1;                // TP ranks p
  int rank = 0;                // this rank, in [0, size)
  Transport* group = nullptr;  // the TP ranks' transport (world_size() == size, rank() == rank);
                               // may be null when size == 1. Not owned: it must outlive every
                               // model built with it.
  int kv_replicas = 1;         // a Llama's: ranks holding each key-value head (KvReplicas); else 1
};

// Throws UserError naming the values unless size >= 1, rank is in [0, size), a group is given
// when size > 1 and any group given has that size and rank, and `heads` divides by size (each
// rank keeps heads / size whole heads; then hidden and 4 * hidden divide by size too).
void CheckTensorParallel(const TensorParallel& tp, int heads);

// Identity forward; the backward sums the gradient over tp.group. tp.size == 1: x itself.
at::Tensor CopyToTensorParallel(const at::Tensor& x, const TensorParallel& tp);

// Sums x over tp.group in forward (a new tensor); identity backward. tp.size == 1: x itself.
at::Tensor ReduceFromTensorParallel(const at::Tensor& x, const TensorParallel& tp);

// A region where the TP ranks split the tokens instead of the features (a Mixture-of-Experts
// block's routing and experts under tp): TokensOfTensorParallelRank(x) is this rank's
// contiguous 1 / p of x's rows (N, ...) -> (N / p, ...), its backward all-gathers the ranks'
// gradients (the whole input's gradient on every rank); TokensOfEveryTensorParallelRank(y)
// all-gathers the ranks' rows in rank order (N / p, ...) -> (N, ...), its backward keeps this
// rank's rows of the (replicated) gradient. Precondition: N divides by p. tp.size == 1: the
// argument itself.
at::Tensor TokensOfTensorParallelRank(const at::Tensor& x, const TensorParallel& tp);
at::Tensor TokensOfEveryTensorParallelRank(const at::Tensor& x, const TensorParallel& tp);

// Key-value heads replicated over r = tp.kv_replicas consecutive ranks (r > 1): each of the r
// ranks projects the same head from the replicated input x for its own query heads, and its
// gradient holds only their part. ScaleToKvReplicas(x) is x, its backward multiplies the
// gradient by 1 / r (the r copies' input gradients, summed by CopyToTensorParallel, count
// once); SumOverKvReplicas(kv) is kv (n, T, d), its backward sums the gradient over the r
// ranks (an all-reduce over tp.group), so each copy's weight gradient is the whole head's.
// With r == 1 both return their argument.
at::Tensor ScaleToKvReplicas(const at::Tensor& x, const TensorParallel& tp);
at::Tensor SumOverKvReplicas(const at::Tensor& kv, const TensorParallel& tp);

// Row-parallel linear map: x (..., in / p), weight (out, in / p) this rank's columns, bias
// (out) replicated or undefined -> (..., out), the sum of every rank's x weight^T plus bias.
// tp.size == 1: Linear(x, weight, bias).
at::Tensor RowParallelLinear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                             const TensorParallel& tp);

// Rank `rank`'s part of `full` among `size` ranks (ShardRowsOf; may share memory with `full`,
// `full` itself when replicated or size == 1, a new tensor with zero rows when padded): to load
// a checkpoint saved by an unsharded model. Throws UserError when rank is outside [0, size) or
// full's extent along split.dim does not split (ShardRowsOf).
at::Tensor TakeShard(const at::Tensor& full, TensorParallelSplit split, int size, int rank);

// The full tensor from every TP rank's part `local` (the inverse of TakeShard), on every rank:
// a collective over tp.group when split and tp.size > 1 (every TP rank calls it with its part
// of the same tensor, in the same order); otherwise `local` itself, without communication.
// `extent` is the full tensor's extent along split.dim (a padded split's padding is dropped).
at::Tensor GatherShards(const at::Tensor& local, TensorParallelSplit split,
                        const TensorParallel& tp, int64_t extent);

// For model builders: declares `name` in `specs` as laid out by `spec`, and returns this
// rank's part of its full initial value `full` as a new contiguous leaf that requires grad, or
// `full` itself when replicated or tp.size == 1.
at::Tensor ShardParam(const std::string& name, const ParameterSpec& spec, const at::Tensor& full,
                      const TensorParallel& tp, ParameterSpecs& specs);

// How a model builder makes its drawn weights (the normal-initialised matrices): drawn;
// undrawn (allocated, their values undefined: read from a checkpoint next); or as shapes
// alone (on the meta device: no memory, for the parameters' names, shapes and specs).
enum class WeightInit { kDrawn, kUndrawn, kShapesOnly };

// For model builders whose weights are read afterwards (or not needed): declares `name` as
// ShardParam does and returns this rank's part of a parameter of full shape `shape`, an fp32
// leaf that requires grad, allocated uninitialised, or on the meta device for kShapesOnly.
// Precondition: init is not kDrawn.
at::Tensor UndrawnParam(const std::string& name, const ParameterSpec& spec,
                        std::vector<int64_t> shape, const TensorParallel& tp, ParameterSpecs& specs,
                        WeightInit init = WeightInit::kUndrawn);

}  // namespace conveyor

#endif  // CONVEYOR_NN_TENSOR_PARALLEL_H_
