#include "conveyor/nn/transformer.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cmath>
#include <limits>
#include <optional>
#include <tuple>

#include "conveyor/common/error.h"
#include "conveyor/device/compute_precision.h"
#include "conveyor/device/torch_compat.h"
#include "conveyor/nn/linear.h"

namespace conveyor {

at::Tensor NormalParam(at::Generator& gen, at::IntArrayRef shape, double std) {
  return at::normal(0.0, std, shape, gen).requires_grad_(true);
}

at::Tensor ZerosParam(at::IntArrayRef shape) { return at::zeros(shape).requires_grad_(true); }

at::Tensor OnesParam(at::IntArrayRef shape) { return at::ones(shape).requires_grad_(true); }

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The most negative finite value of a floating dtype: what a masked score becomes, so that
// softmax gives it no weight in fp32, fp16 and bf16 alike (a fixed -1e9 is out of fp16's range).
at::Scalar LowestOf(at::ScalarType type) {
  switch (type) {
    case at::kDouble:
      return std::numeric_limits<double>::lowest();
    case at::kHalf:
      return std::numeric_limits<c10::Half>::lowest();
    case at::kBFloat16:
      return std::numeric_limits<c10::BFloat16>::lowest();
    default:
      return std::numeric_limits<float>::lowest();
  }
}

// The (1, 1, T, T) causal mask and/or the (n, 1, T, T) mask of same-document pairs
// (documents (n, T) or undefined), combined: broadcastable to (n, H, T, T), true = allowed;
// undefined when everything is.
at::Tensor AllowedPairs(int64_t t, bool causal, const at::Tensor& documents,
                        const at::TensorOptions& options) {
  at::Tensor allowed;
  if (causal) allowed = at::ones({t, t}, options.dtype(at::kBool)).tril().view({1, 1, t, t});
  if (documents.defined()) {
    const at::Tensor same = documents.unsqueeze(2).eq(documents.unsqueeze(1)).unsqueeze(1);
    allowed = allowed.defined() ? allowed.logical_and(same) : same;
  }
  return allowed;
}

// q, k, v (n, H, T, d) -> softmax(q k^T / sqrt(d), masked) v (n, H, T, d), the (n, H, T, T)
// scores materialised. Keys allowed as SelfAttention and AttentionHeads say; key_mask (n, T)
// bool or undefined, documents (n, T) int64 or undefined.
at::Tensor ManualAttention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                           bool causal, const at::Tensor& key_mask, const at::Tensor& documents) {
  const int64_t n = q.size(0), t = q.size(2);
  at::Tensor allowed = AllowedPairs(t, causal, documents, q.options());
  if (key_mask.defined()) {
    at::Tensor keys = key_mask.to(at::kBool).view({n, 1, 1, t});
    allowed = allowed.defined() ? allowed.logical_and(keys) : keys;
  }
  at::Tensor scores = q.matmul(k.transpose(-2, -1)) / std::sqrt(double(q.size(-1)));
  if (allowed.defined())
    scores = scores.masked_fill(allowed.logical_not(), LowestOf(scores.scalar_type()));
  // The softmax is taken in at least fp32 (bf16 scores under autocast), its weights in v's
  // dtype.
  const at::ScalarType softmax_dtype = at::promote_types(scores.scalar_type(), at::kFloat);
  return scores.softmax(-1, softmax_dtype).to(v.scalar_type()).matmul(v);
}

// The attention of SelfAttention on q, k, v (n, H, T, d): the fused kernel where libtorch has
// one and no key is masked (a fully masked query row has no defined result there; a document
// mask leaves each token itself at least), else the manual path.
at::Tensor AttentionCore(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal,
                         const at::Tensor& key_mask, const at::Tensor& documents) {
  if (kHasFusedAttention && !key_mask.defined()) {
    if (!documents.defined()) return FusedAttention(q, k, v, causal);
    return FusedAttention(q, k, v, false, AllowedPairs(q.size(2), causal, documents, q.options()));
  }
  return ManualAttention(q, k, v, causal, key_mask, documents);
}

// AttentionCore that keeps only q, k, v for backward and recomputes the rest there, under
// the autocast (mixed precision) its forward ran with.
struct RecomputedAttention : public torch::autograd::Function<RecomputedAttention> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k,
                            const at::Tensor& v, bool causal, const at::Tensor& key_mask_or_q,
                            bool masked, const at::Tensor& documents_or_q, bool by_documents) {
    const at::Tensor key_mask = masked ? key_mask_or_q : at::Tensor();
    const at::Tensor documents = by_documents ? documents_or_q : at::Tensor();
    ctx->save_for_backward({q, k, v});
    ctx->saved_data["causal"] = causal;
    ctx->saved_data["key_mask"] = key_mask;
    ctx->saved_data["documents"] = documents;
    const std::optional<c10::ScalarType> autocast = AutocastDtype(q.device().type());
    ctx->saved_data["autocast"] = autocast ? static_cast<int64_t>(*autocast) : int64_t{-1};
    at::NoGradGuard no_grad;
    return AttentionCore(q, k, v, causal, key_mask, documents);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    variable_list leaves;
    for (const at::Tensor& t : saved) leaves.push_back(t.detach().requires_grad_(true));
    at::Tensor key_mask;
    if (ctx->saved_data["key_mask"].isTensor()) key_mask = ctx->saved_data["key_mask"].toTensor();
    at::Tensor documents;
    if (ctx->saved_data["documents"].isTensor()) {
      documents = ctx->saved_data["documents"].toTensor();
    }
    at::AutoGradMode enable(true);
    const int64_t autocast = ctx->saved_data["autocast"].toInt();
    const ComputePrecisionGuard precision(
        leaves[0].device().type(),
        autocast >= 0 ? static_cast<c10::ScalarType>(autocast) : at::kFloat, autocast >= 0);
    const at::Tensor y = AttentionCore(leaves[0], leaves[1], leaves[2],
                                       ctx->saved_data["causal"].toBool(), key_mask, documents);
    variable_list g = torch::autograd::grad({y}, leaves, {grads[0]});
    return {g[0],         g[1],         g[2],         at::Tensor(), at::Tensor(),
            at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor AttentionHeads(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                          bool causal, const at::Tensor& key_mask, bool recompute_scores,
                          const at::Tensor& documents) {
  if (recompute_scores && at::GradMode::is_enabled()) {
    return RecomputedAttention::apply(q, k, v, causal, key_mask.defined() ? key_mask : q,
                                      key_mask.defined(), documents.defined() ? documents : q,
                                      documents.defined());
  }
  return AttentionCore(q, k, v, causal, key_mask, documents);
}

at::Tensor DocumentIds(const at::Tensor& positions) {
  return positions.eq(0).to(at::kLong).cumsum(1);
}

at::Tensor SelfAttention(const at::Tensor& x, const AttentionWeights& w, int64_t heads, bool causal,
                         const at::Tensor& key_mask, bool recompute_scores,
                         const TensorParallel& tp, KvCache* cache, const MicroBatch& mb) {
  at::Tensor qkv = ColumnParallelLinears(x, {{w.qkv_w, w.qkv_b}}, tp)[0];  // (n, T, 3C/p)
  const int64_t n = qkv.size(0), t = qkv.size(1), d = x.size(2) / heads;
  const int64_t local_heads = heads / tp.size, c = local_heads * d;  // c = C/p
  auto split = [&](int64_t i) {                                      // (n, H/p, T, d)
    return qkv.narrow(2, i * c, c).reshape({n, t, local_heads, d}).transpose(1, 2);
  };
  at::Tensor q = split(0), k = split(1), v = split(2);
  if (mb.cache_position >= 0) {
    CONVEYOR_ASSERT(cache != nullptr) << "a cached forward through attention without a cache";
    std::tie(k, v) = cache->Extend(mb, k, v);
    causal = causal && KvCache::Causal(mb);
  }
  CONVEYOR_CHECK(!key_mask.defined() ||
                 (key_mask.dim() == 2 && key_mask.size(0) == n && key_mask.size(1) == t))
      << "attention mask of shape " << key_mask.sizes() << " does not match the input's (n, T) = ("
      << n << ", " << t << ")";
  const at::Tensor documents =  // packed documents kept apart (microbatch.h)
      mb.positions.defined() && mb.cache_position < 0 ? DocumentIds(mb.positions) : at::Tensor();
  const at::Tensor y =  // (n, T, C/p)
      AttentionHeads(q, k, v, causal, key_mask, recompute_scores, documents)
          .transpose(1, 2)
          .reshape({n, t, c});
  return RowParallelLinear(y, w.proj_w, w.proj_b, tp);
}

at::Tensor Mlp(const at::Tensor& x, const at::Tensor& fc_w, const at::Tensor& fc_b,
               const at::Tensor& proj_w, const at::Tensor& proj_b, const TensorParallel& tp,
               bool gelu_tanh) {
  const at::Tensor hidden =  // (n, T, 4C/p)
      at::gelu(ColumnParallelLinears(x, {{fc_w, fc_b}}, tp)[0], gelu_tanh ? "tanh" : "none");
  return RowParallelLinear(hidden, proj_w, proj_b, tp);
}

}  // namespace conveyor
