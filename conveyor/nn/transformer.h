// Building blocks shared by the model zoo's transformers.
//
// Parameters are leaf tensors that require grad, drawn only from the generator a layer gets
// from LayerInitGenerator. Every linear map goes through Linear, so its weight gradient can
// be deferred (split backward).
//
// Shapes: x (n, T, C); key_mask (n, T) bool, true = a real token; heads divides C.
//
// Tensor parallelism (tensor_parallel.h): with tp.size = p > 1 the weights are this rank's
// shards (as their layers declare them: parameter_spec.h), x and the result are replicated (n, T,
// C), or this rank's positions (n, T/p, C) under sequence parallelism, and the functions are
// collectives over tp.group (in forward: one all-reduce, or an all-gather and a reduce-scatter;
// the same in backward).
#ifndef CONVEYOR_NN_TRANSFORMER_H_
#define CONVEYOR_NN_TRANSFORMER_H_

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include <cstdint>

#include "conveyor/module/microbatch.h"
#include "conveyor/nn/kv_cache.h"
#include "conveyor/nn/tensor_parallel.h"

namespace conveyor {

at::Tensor NormalParam(at::Generator& gen, at::IntArrayRef shape, double std);
at::Tensor ZerosParam(at::IntArrayRef shape);
at::Tensor OnesParam(at::IntArrayRef shape);

// p = tp.size; with p = 1 the full weights.
struct AttentionWeights {
  at::Tensor qkv_w, qkv_b;    // (3C/p, C), (3C/p): this rank's heads' queries, keys, values
  at::Tensor proj_w, proj_b;  // (C, C/p), (C): output projection, proj_b replicated
};

// Multi-head scaled dot-product self-attention, x (n, T, C) -> (n, T, C). Query i attends
// to key j when j is a real token (key_mask undefined: all are) and, if `causal`, j <= i.
// A query with no allowed key attends uniformly to all keys (its output is finite).
// With `recompute_scores` the (n, H, T, T) scores and probabilities are not kept for
// backward: it computes them again from q, k, v (selective activation recomputation; the
// same gradients). Throws UserError when key_mask is defined and not of shape (n, T).
// `heads` is the model's head count H; under TP this rank computes H / p of them (the QKV
// projection column-parallel, the output projection row-parallel). Generation: with
// mb.cache_position >= 0, keys and values go through `cache` (not null then) as
// conveyor/nn/kv_cache.h says, and x holds the tokens from that position on. With
// mb.positions (packed documents) a query attends only to its own document's keys.
at::Tensor SelfAttention(const at::Tensor& x, const AttentionWeights& w, int64_t heads, bool causal,
                         const at::Tensor& key_mask, bool recompute_scores = false,
                         const TensorParallel& tp = {}, KvCache* cache = nullptr,
                         const MicroBatch& mb = MicroBatch{});

// The attention of SelfAttention on heads already projected: q (n, H, T, d), k and v
// (n, H, T, d) -> (n, H, T, d), keys allowed as SelfAttention says, `recompute_scores` as
// there. For models that project (and rotate) their heads themselves. With `documents` ((n, T)
// int64, DocumentIds) query i attends key j only when both are of one document (packed
// documents kept apart); the fused kernel takes that mask too, the manual path where a
// key_mask is given.
at::Tensor AttentionHeads(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                          bool causal, const at::Tensor& key_mask, bool recompute_scores,
                          const at::Tensor& documents = {});

// The document of each token, (n, T) int64 from a micro-batch's positions (n, T)
// (microbatch.h): the count of document starts (positions 0) at or before it.
at::Tensor DocumentIds(const at::Tensor& positions);

// Two-layer MLP with GELU: x (n, T, C) -> fc (4C/p, C) -> gelu -> proj (C, 4C/p) -> (n, T, C).
// fc column-parallel (fc_b (4C/p) split), proj row-parallel (proj_b (C) replicated). GELU
// exact, or in its tanh approximation with `gelu_tanh` (GPT-2's gelu_new).
at::Tensor Mlp(const at::Tensor& x, const at::Tensor& fc_w, const at::Tensor& fc_b,
               const at::Tensor& proj_w, const at::Tensor& proj_b, const TensorParallel& tp = {},
               bool gelu_tanh = false);

}  // namespace conveyor

#endif  // CONVEYOR_NN_TRANSFORMER_H_
