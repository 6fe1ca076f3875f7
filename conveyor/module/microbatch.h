// A training batch and its split into micro-batches.
//
// Every rank builds the same batch (deterministic data), so every rank knows each
// micro-batch's shape without exchanging shapes: stage 0 reads `inputs`, the last stage
// reads `targets`, every stage may read `attention_mask` and `positions`.
//
// Document masks (packed documents kept apart): `positions` holds each token's position in
// its document within the sample, 0 where one begins (a sample's first token is 0 too). A
// token attends only to the tokens of its own document (those since the last 0 at or before
// it), and rotary embeddings rotate it by that position.
//
// Loss scaling: the model's loss is a sum over the targets of a micro-batch; dividing it by
// `loss_denominator` (the count of counted targets in the whole batch) before backward
// makes the gradients equal those of one full-batch step with a mean loss, whatever the
// split, uneven or not.
#ifndef CONVEYOR_MODULE_MICROBATCH_H_
#define CONVEYOR_MODULE_MICROBATCH_H_

#include <ATen/core/Tensor.h>

#include <utility>
#include <vector>

namespace conveyor {

struct Batch {
  at::Tensor inputs;          // (N, T) int64 token ids
  at::Tensor targets;         // (N, T) or (N,) int64; -1 = not counted
  at::Tensor attention_mask;  // (N, T) bool, true = a real token; undefined = all real
  at::Tensor positions;       // (N, T) int64 (above); undefined = one document, 0 .. T-1
};

struct MicroBatch {
  int index = 0;                // 0 .. m-1
  int64_t first_sample = 0;     // offset of its first sample in the batch
  at::Tensor inputs;            // (n, T)
  at::Tensor targets;           // (n, T) or (n,)
  at::Tensor attention_mask;    // (n, T) or undefined
  at::Tensor positions;         // (n, T) or undefined
  double loss_denominator = 1;  // counted targets in the whole batch
  // Its counted targets over loss_denominator: its part of the whole batch's loss, the
  // weight of a per-micro-batch term in it (auxiliary_loss.h). The shares of a batch's
  // micro-batches, over every data-parallel replica, sum to 1.
  double share = 1;
  // Generation with a key-value cache (conveyor/nn/kv_cache.h): the position of inputs'
  // first token, whose predecessors' keys and values the attention layers kept; -1: none.
  int64_t cache_position = -1;

  int64_t size() const { return inputs.size(0); }
  int64_t seq_len() const { return inputs.dim() > 1 ? inputs.size(1) : 1; }
};

// Splits along dim 0 into m micro-batches of sizes differing by at most one, larger first
// (10 into 4 gives 3, 3, 2, 2). Their loss_denominator is `loss_denominator`, or, when it
// is 0, the batch's own CountTargets (a data-parallel replica passes the whole global
// batch's). Throws UserError when the batch has fewer than m samples or the fields disagree
// in size.
std::vector<MicroBatch> SplitBatch(const Batch& batch, int m, double loss_denominator = 0);

// Sample range [first, first + size) of part i of m parts of n samples, larger parts first:
// how SplitBatch and SliceBatch size their parts.
std::pair<int64_t, int64_t> PartOf(int64_t n, int i, int m);

// Part `index` of `count` contiguous parts of the batch along dim 0, sized as SplitBatch
// sizes micro-batches (a data-parallel replica's share). The tensors are views of `batch`'s.
// Throws UserError when the batch has fewer than `count` samples; index in [0, count).
Batch SliceBatch(const Batch& batch, int index, int count);

// The batch's tensors on `device` (the same tensors when they are there already).
Batch ToDevice(const Batch& batch, const c10::Device& device);

// Counted targets (those >= 0) in `targets`, at least 1.
double CountTargets(const at::Tensor& targets);

}  // namespace conveyor

#endif  // CONVEYOR_MODULE_MICROBATCH_H_
