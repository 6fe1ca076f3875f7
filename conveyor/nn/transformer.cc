#include "conveyor/nn/transformer.h"

#include <ATen/ATen.h>

#include <cmath>

#include "conveyor/common/error.h"
#include "conveyor/nn/linear.h"

namespace conveyor::nn {

at::Tensor NormalParam(at::Generator& gen, at::IntArrayRef shape, double std) {
  return at::normal(0.0, std, shape, gen).requires_grad_(true);
}

at::Tensor ZerosParam(at::IntArrayRef shape) { return at::zeros(shape).requires_grad_(true); }

at::Tensor OnesParam(at::IntArrayRef shape) { return at::ones(shape).requires_grad_(true); }

at::Tensor SelfAttention(const at::Tensor& x, const AttentionWeights& w, int64_t heads, bool causal,
                         const at::Tensor& key_mask) {
  const int64_t n = x.size(0), t = x.size(1), c = x.size(2), d = c / heads;
  at::Tensor qkv = Linear(x, w.qkv_w, w.qkv_b);  // (n, T, 3C)
  auto split = [&](int64_t i) {                  // (n, H, T, d)
    return qkv.narrow(2, i * c, c).reshape({n, t, heads, d}).transpose(1, 2);
  };
  at::Tensor q = split(0), k = split(1), v = split(2);
  at::Tensor scores = q.matmul(k.transpose(-2, -1)) / std::sqrt(double(d));  // (n, H, T, T)
  at::Tensor allowed;  // broadcastable to (n, H, T, T); undefined = everything allowed
  if (causal) allowed = at::ones({t, t}, x.options().dtype(at::kBool)).tril().view({1, 1, t, t});
  if (key_mask.defined()) {
    CONVEYOR_CHECK(key_mask.dim() == 2 && key_mask.size(0) == n && key_mask.size(1) == t)
        << "attention mask of shape " << key_mask.sizes()
        << " does not match the input's (n, T) = (" << n << ", " << t << ")";
    at::Tensor keys = key_mask.to(at::kBool).view({n, 1, 1, t});
    allowed = allowed.defined() ? allowed.logical_and(keys) : keys;
  }
  if (allowed.defined()) scores = scores.masked_fill(allowed.logical_not(), -1e9);
  at::Tensor y = scores.softmax(-1).matmul(v);  // (n, H, T, d)
  y = y.transpose(1, 2).reshape({n, t, c});     // (n, T, C)
  return Linear(y, w.proj_w, w.proj_b);
}

at::Tensor Mlp(const at::Tensor& x, const at::Tensor& fc_w, const at::Tensor& fc_b,
               const at::Tensor& proj_w, const at::Tensor& proj_b) {
  return Linear(at::gelu(Linear(x, fc_w, fc_b)), proj_w, proj_b);
}

}  // namespace conveyor::nn
