// Megatron-style tensor parallelism (TP) for the model zoo: the TP group a model is built for,
// the autograd operators at the edges of a TP region, and how each parameter is split across
// the TP ranks (to count, gather and shard parameters and their gradients).
//
// The p ranks of a TP group run the same layers on the same tokens. Inside a block the
// attention heads and the MLP's hidden units are split:
//   column-parallel linears (ColumnParallelLinears): weight rows split. They take the
//     activations outside the region and return this rank's slice of the features; the
//     backward sums the ranks' partial input gradients.
//   row-parallel linear (RowParallelLinear): weight columns split. It takes the sliced
//     features and ReduceOutOfTensorParallel sums the ranks' partial outputs; the replicated
//     bias is added after the sum.
// Outside the regions (norms, residuals, the embedding's output, the messages between stages)
// the activations are either replicated, (n, T, C) on every rank, or, under sequence
// parallelism (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
// Transformer Models"), split along the sequence: rank r holds positions [r T/p, (r+1) T/p) of
// every sequence, (n, T/p, C). Then the column-parallel entry all-gathers the sequence (and
// keeps only the rank's positions for backward, gathering them again there) and the
// row-parallel exit reduce-scatters it instead of all-reducing; the replicated parameters used
// outside the regions see only the rank's positions, so their gradients are summed over the TP
// ranks too (ReplicatedSpec). The communicated bytes are the same; the activations outside the
// regions take 1 / p of the memory.
// Weight gradients stay local (deferred as Linear's, for split backward); only input
// gradients and partial outputs cross the group.
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
  // Sequence parallelism: outside the TP regions each rank holds T / size positions of every
  // sequence. Without effect at size 1.
  bool sequence_parallel = false;

  // Whether the activations outside the TP regions are split along the sequence.
  bool splits_sequence() const { return size > 1 && sequence_parallel; }
  // The positions of a sequence of t tokens this rank holds outside the TP regions, from
  // first_position(t) on: t / size under sequence parallelism, else t (from 0).
  int64_t local_positions(int64_t t) const { return splits_sequence() ? t / size : t; }
  int64_t first_position(int64_t t) const { return splits_sequence() ? rank * (t / size) : 0; }
};

// Throws UserError naming the values unless size >= 1, rank is in [0, size), a group is given
// when size > 1 and any group given has that size and rank, and `heads` divides by size (each
// rank keeps heads / size whole heads; then hidden and 4 * hidden divide by size too).
void CheckTensorParallel(const TensorParallel& tp, int heads);

// Throws UserError naming the numbers unless a sequence of t tokens splits over tp's ranks
// where tp splits sequences (t divides by tp.size).
void CheckSequenceSplits(int64_t t, const TensorParallel& tp);

// The spec of a replicated parameter (parameter_spec.h) whose gradient on each TP rank covers
// only that rank's share of the work when `partial_over_tp` (a norm under sequence
// parallelism, a norm applied to each of this rank's heads, a router of this rank's tokens):
// summed over tp x dp then; otherwise the default spec (summed over dp).
ParameterSpec ReplicatedSpec(bool partial_over_tp);

// Sums x over tp.group in forward (a new tensor); identity backward. tp.size == 1: x itself.
at::Tensor ReduceFromTensorParallel(const at::Tensor& x, const TensorParallel& tp);

// One product of ColumnParallelLinears: weight (out / p, C) this rank's rows, bias (out / p)
// or undefined, and the factor on this product's part of the input's gradient (1 / r for a
// key-value projection whose head r ranks hold: KeyValueParallel).
struct ColumnLinear {
  at::Tensor weight;
  at::Tensor bias;
  double input_grad_scale = 1;
};

// The column-parallel products of one input: x (n, T, C) replicated, or this rank's positions
// (n, T/p, C) under sequence parallelism (all-gathered along T first) -> for each linear i,
// (n, T, out_i / p) = x_all W_i^T + b_i. Backward: x's gradient sum_i s_i g_i W_i summed over
// the TP group (reduce-scattered along T under sequence parallelism); the products keep only x
// for backward (this rank's positions: gathered again there) and defer their weight gradients
// as Linear does. Mixed precision as Linear's. tp.size == 1: Linear for each.
// Precondition: the scales are 1 unless tp.size > 1; under sequence parallelism T / p is
// whole (CheckSequenceSplits).
std::vector<at::Tensor> ColumnParallelLinears(const at::Tensor& x,
                                              const std::vector<ColumnLinear>& linears,
                                              const TensorParallel& tp);

// The exit of a TP region: the sum of the ranks' partial results x (n, T, ...) -> (n, T, ...)
// replicated (an all-reduce; identity backward), or under sequence parallelism this rank's
// positions of the sum (n, T/p, ...) (a reduce-scatter; the backward all-gathers). tp.size
// == 1: x itself.
at::Tensor ReduceOutOfTensorParallel(const at::Tensor& x, const TensorParallel& tp);

// A region where the TP ranks split the tokens instead of the features (a Mixture-of-Experts
// block's routing and experts under tp, with replicated activations around it):
// TokensOfTensorParallelRank(x) is this rank's positions of every sequence, (n, T, ...) ->
// (n, T/p, ...) as sequence parallelism splits them; its backward all-gathers the ranks'
// gradients (the whole input's gradient on every rank); TokensOfEveryTensorParallelRank(y)
// all-gathers the ranks' positions (n, T/p, ...) -> (n, T, ...), its backward keeps this
// rank's positions of the (replicated) gradient. Precondition: T divides by p. tp.size == 1:
// the argument itself.
at::Tensor TokensOfTensorParallelRank(const at::Tensor& x, const TensorParallel& tp);
at::Tensor TokensOfEveryTensorParallelRank(const at::Tensor& x, const TensorParallel& tp);

// Key-value heads replicated over r = tp.kv_replicas consecutive ranks (r > 1): each of the r
// ranks projects the same head for its own query heads, and its gradient holds only their
// part. SumOverKvReplicas(kv) is kv (n, T, d), its backward sums the gradient over the r ranks
// (an all-reduce over tp.group), so each copy's weight gradient is the whole head's (the input
// gradient's part counted once by ColumnLinear::input_grad_scale 1 / r). With r == 1: kv.
at::Tensor SumOverKvReplicas(const at::Tensor& kv, const TensorParallel& tp);

// Row-parallel linear map: x (n, T, in / p), weight (out, in / p) this rank's columns, bias
// (out) replicated or undefined -> the sum of every rank's x weight^T, plus bias:
// (n, T, out) replicated, or this rank's positions (n, T/p, out) under sequence parallelism
// (ReduceOutOfTensorParallel). tp.size == 1: Linear(x, weight, bias).
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
