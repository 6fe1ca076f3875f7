// Context parallelism (CP): every sequence split over the N ranks of a CP group, each rank
// running the whole model on its share of the positions, attention by ring (Liu et al. 2023,
// "Ring Attention with Blockwise Transformers for Near-Infinite Context").
//
// The split balances causal attention's work (as Megatron-Core's and Llama 3's): a sequence
// of T tokens is cut into 2N chunks of c = T / 2N, rank r holding chunks r and 2N - 1 - r, in
// that order: (n, T/N, ...) with positions [r c, (r+1) c) then [(2N-1-r) c, (2N-r) c). A rank
// early in the sequence then also holds a late chunk, so every rank's queries see about as
// many keys.
//
// Only attention mixes positions: RingAttention passes each rank's keys and values around
// the group point to point (rank r sends to r + 1 and receives from r - 1, N - 1 steps, each
// overlapping the block of scores in hand), merging the blocks' partial results with their
// log-sum-exp in fp32; the backward passes the keys and values around again, with their
// gradients travelling beside them back to their rank. Everything else is per position: the
// loss of each rank is that of its positions (summed over the group), the weights'
// gradients are summed over dp x cp.
//
// Thread-safety and ordering: as tensor_parallel.h's; RingAttention's messages are
// point-to-point on cp.group, so every CP rank runs the same attentions in the same order.
#ifndef CONVEYOR_NN_CONTEXT_PARALLEL_H_
#define CONVEYOR_NN_CONTEXT_PARALLEL_H_

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace conveyor {

class Transport;

// The CP group a model is built for; size 1 (the default): whole sequences, no messages.
struct ContextParallel {
  int size = 1;                // N
  int rank = 0;                // in [0, size)
  Transport* group = nullptr;  // world_size() == size, rank() == rank; null when size == 1

  // The tokens of a sequence of t this rank holds: t / size.
  int64_t local_length(int64_t t) const { return t / size; }
  // Their positions in the sequence, (t / size) int64 on `device`: chunk r, then chunk
  // 2N - 1 - r (0 .. t - 1 when size == 1).
  at::Tensor Positions(int64_t t, const at::Device& device) const;
};

// Throws UserError naming the numbers unless the group is well-formed (CheckParallelGroup,
// parallel_group.h) and a sequence of t tokens cuts into 2 x size equal chunks.
void CheckContextParallel(const ContextParallel& cp);
void CheckContextSplits(int64_t t, const ContextParallel& cp);

// This rank's positions of x (n, T, ...): (n, T/N, ...) in Positions' order; x itself when
// size == 1. For inputs and targets (no gradient is passed back).
at::Tensor ContextShareOf(const at::Tensor& x, const ContextParallel& cp);

// Causal attention of this rank's queries over every rank's keys: q (n, H, L, d), k and v
// (n, KV, L, d) at this rank's positions (L = T / N; KV dividing H, each key-value head serving
// H / KV consecutive query heads, grouped-query attention: the ring carries the KV heads) ->
// (n, H, L, d), equal to the rows of whole-sequence causal attention (softmax(q k^T / sqrt(d))
// v) at these positions. Keeps q, k, v, the output and each row's log-sum-exp for backward, never a
// (L, T) block of scores. Scores and merging in fp32; the output in q's dtype. With
// `documents` ((n, T) int64, the whole sequence's document ids: DocumentIds of a micro-batch's
// positions, which every rank holds) a query attends only to the keys of its own document.
// Precondition: cp.size > 1; every rank of the group calls it with the same shapes.
at::Tensor RingAttention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                         const ContextParallel& cp, const at::Tensor& documents = {});

}  // namespace conveyor

#endif  // CONVEYOR_NN_CONTEXT_PARALLEL_H_
