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

#include <string_view>

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
};

// Throws UserError naming the values unless size >= 1, rank is in [0, size), a group is given
// when size > 1 and any group given has that size and rank, and `heads` divides by size (each
// rank keeps heads / size whole heads; then hidden and 4 * hidden divide by size too).
void CheckTensorParallel(const TensorParallel& tp, int heads);

// Identity forward; the backward sums the gradient over tp.group. tp.size == 1: x itself.
at::Tensor CopyToTensorParallel(const at::Tensor& x, const TensorParallel& tp);

// Sums x over tp.group in forward (a new tensor); identity backward. tp.size == 1: x itself.
at::Tensor ReduceFromTensorParallel(const at::Tensor& x, const TensorParallel& tp);

// Row-parallel linear map: x (..., in / p), weight (out, in / p) this rank's columns, bias
// (out) replicated or undefined -> (..., out), the sum of every rank's x weight^T plus bias.
// tp.size == 1: Linear(x, weight, bias).
at::Tensor RowParallelLinear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                             const TensorParallel& tp);

// How a parameter is laid out across the TP ranks. Replicated (dim < 0): every rank holds the
// full tensor. Split: along `dim` the full tensor is `blocks` equal blocks (3 for a QKV
// projection's stacked queries, keys and values; 1 otherwise), each cut into p equal parts;
// rank t holds part t of every block, the blocks in order. So a QKV weight (3C, C) gives rank
// t the rows of its heads from each of q, k and v: (3C / p, C).
struct TensorParallelSplit {
  int dim = -1;  // -1: replicated
  int blocks = 1;
  bool replicated() const { return dim < 0; }
};

// The split of the parameter named `name`, a global name of BuildGpt, BuildClassifier or
// BuildLlama (its gradient is split the same way); any other name is replicated. Independent
// of the TP size.
//   blocks.i.attn.qkv.weight / .bias   dim 0, 3 blocks  (3C, C) -> (3C/p, C), (3C) -> (3C/p)
//   blocks.i.attn.proj.weight          dim 1            (C, C) -> (C, C/p)
//   blocks.i.mlp.fc.weight / .bias     dim 0            (4C, C) -> (4C/p, C), (4C) -> (4C/p)
//   blocks.i.mlp.proj.weight           dim 1            (C, 4C) -> (C, 4C/p)
//   embed.wte, head.lm.weight (GPT)    dim 0            (V, C) -> (V/p, C)
// Llama (BuildLlama, Hugging Face's names; H heads, KV key-value heads of d, F MLP units):
//   model.layers.i.self_attn.q_proj.weight          dim 0   (H d, C) -> (H d/p, C)
//   model.layers.i.self_attn.k_proj / v_proj.weight dim 0   (KV d, C) -> (KV d/p, C)
//   model.layers.i.self_attn.o_proj.weight          dim 1   (C, H d) -> (C, H d/p)
//   model.layers.i.mlp.gate_proj / up_proj.weight   dim 0   (F, C) -> (F/p, C)
//   model.layers.i.mlp.down_proj.weight             dim 1   (C, F) -> (C, F/p)
//   model.embed_tokens.weight, lm_head.weight       dim 0   (V, C) -> (V/p, C)
// Replicated: layer norms, position embeddings, the row-parallel linears' biases, and the
// classifier's embedding and head. To count a gradient norm once, add replicated parameters
// on TP rank 0 only and split ones on every rank.
TensorParallelSplit TensorParallelSplitOf(std::string_view name);

// Rank `rank`'s part of `full` among `size` ranks (may share memory with `full`; `full`
// itself when replicated or size == 1): to load a checkpoint saved by an unsharded model.
// Throws UserError when rank is outside [0, size) or full's extent along split.dim does not
// divide by blocks * size.
at::Tensor TakeShard(const at::Tensor& full, TensorParallelSplit split, int size, int rank);

// The full tensor from every TP rank's part `local` (the inverse of TakeShard), on every rank:
// a collective over tp.group when split and tp.size > 1 (every TP rank calls it with its part
// of the same tensor, in the same order); otherwise `local` itself, without communication.
at::Tensor GatherShards(const at::Tensor& local, TensorParallelSplit split,
                        const TensorParallel& tp);

// For model builders: the parameter `name` of a model built for tp, from its full initial
// value: this rank's part (TensorParallelSplitOf(name)) as a new contiguous leaf that requires
// grad, or `full` itself when replicated or tp.size == 1.
at::Tensor ShardParam(std::string_view name, const at::Tensor& full, const TensorParallel& tp);

// For model builders whose weights are read afterwards: this rank's part of the parameter
// `name` of full shape `shape`, allocated (fp32, uninitialised) as a leaf that requires grad.
at::Tensor UndrawnParam(std::string_view name, std::vector<int64_t> shape,
                        const TensorParallel& tp);

}  // namespace conveyor

#endif  // CONVEYOR_NN_TENSOR_PARALLEL_H_
