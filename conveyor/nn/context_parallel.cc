#include "conveyor/nn/context_parallel.h"

#include <ATen/ATen.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <vector>

#include "conveyor/comm/transport.h"
#include "conveyor/common/error.h"
#include "conveyor/nn/parallel_group.h"

namespace conveyor {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The ring's message tags: the forward's keys and values, the backward's, and the backward's
// gradients travelling with them.
constexpr std::uint32_t kForwardTag = 0x52490000;
constexpr std::uint32_t kBackwardTag = 0x52491000;
constexpr std::uint32_t kGradientTag = 0x52492000;

// One step around the ring: `tensor` sent to the next rank while the previous rank's arrives,
// both posted at once. The tensor is kept until the send is done.
class RingStep {
 public:
  RingStep(Transport* group, at::Tensor tensor, std::uint32_t tag)
      : sent_(tensor.contiguous()), received_(at::empty_like(sent_)) {
    const int n = group->world_size(), r = group->rank();
    recv_ = group->Recv(received_, (r + n - 1) % n, tag);
    send_ = group->Send(sent_, (r + 1) % n, tag);
  }
  // The previous rank's tensor.
  at::Tensor Wait() {
    send_->Wait();
    recv_->Wait();
    return received_;
  }

 private:
  at::Tensor sent_, received_;
  std::shared_ptr<Work> send_, recv_;
};

// Rank `rank`'s positions of a sequence of t over n ranks.
at::Tensor PositionsOf(int n, int rank, int64_t t, const at::Device& device) {
  return ContextParallel{n, rank}.Positions(t, device);
}

// x (n, KV, L, d) with each head repeated for the H / KV query heads it serves: (n, H, L, d),
// fp32.
at::Tensor ForEveryQueryHead(const at::Tensor& x, int64_t heads) {
  const at::Tensor x32 = x.to(at::kFloat);
  return x.size(1) == heads ? x32 : x32.repeat_interleave(heads / x.size(1), 1);
}

// A gradient for every query head's copy (n, H, L, d) summed to its key-value head's
// (n, KV, L, d).
at::Tensor SumOverQueryHeads(const at::Tensor& g, int64_t kv_heads) {
  if (g.size(1) == kv_heads) return g;
  std::vector<int64_t> grouped = g.sizes().vec();
  grouped[1] = g.size(1) / kv_heads;
  grouped.insert(grouped.begin() + 1, kv_heads);
  return g.view(grouped).sum(2);
}

// The scores of queries q (n, H, L, d) at positions pq over keys k (n, H, L, d, fp32) at
// positions pk, scaled, -inf where a key comes after its query or, with `documents` ((n, T)
// document ids of the whole sequence, DocumentIds), is of another document.
at::Tensor MaskedScores(const at::Tensor& q, const at::Tensor& k, const at::Tensor& pq,
                        const at::Tensor& pk, double scale, const at::Tensor& documents) {
  const at::Tensor scores = q.matmul(k.transpose(-2, -1)) * scale;
  at::Tensor hidden = pk.view({1, -1}).gt(pq.view({-1, 1}));  // (L, L)
  if (documents.defined()) {
    const at::Tensor dq = documents.index_select(1, pq), dk = documents.index_select(1, pk);
    hidden = hidden.logical_or(dq.unsqueeze(2).ne(dk.unsqueeze(1))).unsqueeze(1);  // (n, 1, L, L)
  }
  return scores.masked_fill(hidden, -std::numeric_limits<float>::infinity());
}

// The autograd function of RingAttention.
struct RingFunction : public torch::autograd::Function<RingFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k,
                            const at::Tensor& v, Transport* group,
                            const at::Tensor& documents_or_q, bool by_documents) {
    const at::Tensor documents = by_documents ? documents_or_q : at::Tensor();
    // In fp32 whatever autocast says.
    const c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
    const int n = group->world_size(), r = group->rank();
    const int64_t t = q.size(2) * n;
    const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
    const at::Tensor q32 = q.to(at::kFloat);
    const at::Tensor pq = PositionsOf(n, r, t, q.device());
    at::Tensor kv = at::stack({k, v});  // (2, n, H, L, d): the block in hand
    at::Tensor out, lse;                // (n, H, L, d), (n, H, L, 1) in fp32
    for (int s = 0; s < n; ++s) {
      std::optional<RingStep> step;
      if (s + 1 < n) step.emplace(group, kv, kForwardTag + s);
      const int64_t heads = q.size(1);
      const at::Tensor scores =
          MaskedScores(q32, ForEveryQueryHead(kv[0], heads), pq,
                       PositionsOf(n, (r - s + n) % n, t, q.device()), scale, documents);
      // Rows whose keys are all later than the query (no allowed key in this block) weigh 0.
      const at::Tensor most = scores.amax(-1, /*keepdim=*/true);
      const at::Tensor shift = most.masked_fill(most.isinf(), 0);
      const at::Tensor p = (scores - shift).exp();
      const at::Tensor sum = p.sum(-1, /*keepdim=*/true);
      const at::Tensor block_lse = shift + sum.log();  // -inf where nothing is allowed
      const at::Tensor block_out = p.matmul(ForEveryQueryHead(kv[1], heads)) /
                                   sum.clamp_min(std::numeric_limits<float>::min());
      if (s == 0) {  // the rank's own keys: every query sees itself, lse finite
        out = block_out, lse = block_lse;
      } else {
        const at::Tensor merged = at::maximum(lse, block_lse);
        const at::Tensor total = merged + ((lse - merged).exp() + (block_lse - merged).exp()).log();
        out = out * (lse - total).exp() + block_out * (block_lse - total).exp();
        lse = total;
      }
      if (step) kv = step->Wait();
    }
    ctx->save_for_backward({q, k, v, out, lse});
    ctx->saved_data["group"] = reinterpret_cast<int64_t>(group);
    ctx->saved_data["documents"] = documents;
    return out.to(q.scalar_type());
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor &q = saved[0], &k = saved[1], &v = saved[2], &out = saved[3], &lse = saved[4];
    auto* group = reinterpret_cast<Transport*>(ctx->saved_data["group"].toInt());
    at::Tensor documents;
    if (ctx->saved_data["documents"].isTensor()) {
      documents = ctx->saved_data["documents"].toTensor();
    }
    const int n = group->world_size(), r = group->rank();
    const int64_t t = q.size(2) * n;
    const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
    const at::Tensor q32 = q.to(at::kFloat), dout = grads[0].to(at::kFloat);
    const at::Tensor pq = PositionsOf(n, r, t, q.device());
    const at::Tensor delta = (dout * out).sum(-1, /*keepdim=*/true);  // (n, H, L, 1)
    at::Tensor dq = at::zeros_like(q32);
    at::Tensor kv = at::stack({k, v});
    // The gradient of the block in hand, which travels with it and arrives home at the end.
    at::Tensor dkv = at::zeros(kv.sizes(), q32.options());
    const int64_t heads = q.size(1), kv_heads = k.size(1);
    for (int s = 0; s < n; ++s) {
      std::optional<RingStep> step;
      if (s + 1 < n) step.emplace(group, kv, kBackwardTag + s);
      const at::Tensor kb = ForEveryQueryHead(kv[0], heads), vb = ForEveryQueryHead(kv[1], heads);
      const at::Tensor p =  // (n, H, L, L): the softmax's weights of this block
          (MaskedScores(q32, kb, pq, PositionsOf(n, (r - s + n) % n, t, q.device()), scale,
                        documents) -
           lse)
              .exp();
      const at::Tensor ds = p * (dout.matmul(vb.transpose(-2, -1)) - delta);
      dq.add_(ds.matmul(kb), scale);
      dkv[0].add_(SumOverQueryHeads(ds.transpose(-2, -1).matmul(q32), kv_heads), scale);
      dkv[1].add_(SumOverQueryHeads(p.transpose(-2, -1).matmul(dout), kv_heads));
      dkv = RingStep(group, dkv, kGradientTag + s).Wait();
      if (step) kv = step->Wait();
    }
    return {dq.to(q.scalar_type()), dkv[0].to(k.scalar_type()), dkv[1].to(v.scalar_type()),
            at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor ContextParallel::Positions(int64_t t, const at::Device& device) const {
  const at::TensorOptions options = at::TensorOptions().dtype(at::kLong).device(device);
  if (size == 1) return at::arange(t, options);
  const int64_t c = t / (2 * size);
  return at::cat({at::arange(rank * c, (rank + 1) * c, options),
                  at::arange((2 * size - 1 - rank) * c, (2 * size - rank) * c, options)});
}

void CheckContextParallel(const ContextParallel& cp) {
  CheckParallelGroup("context-parallel", "CP", cp.size, cp.rank, cp.group);
}

void CheckContextSplits(int64_t t, const ContextParallel& cp) {
  CONVEYOR_CHECK(cp.size == 1 || t % (2 * cp.size) == 0)
      << "a sequence of " << t << " tokens does not cut into 2 x " << cp.size
      << " equal chunks for context parallelism over " << cp.size
      << " ranks: use a sequence length divisible by " << 2 * cp.size;
}

at::Tensor ContextShareOf(const at::Tensor& x, const ContextParallel& cp) {
  if (cp.size == 1) return x;
  CheckContextSplits(x.size(1), cp);
  return x.index_select(1, cp.Positions(x.size(1), x.device()));
}

at::Tensor RingAttention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                         const ContextParallel& cp, const at::Tensor& documents) {
  CONVEYOR_ASSERT(cp.size > 1 && cp.group != nullptr)
      << "ring attention over " << cp.size << " context-parallel ranks";
  CONVEYOR_ASSERT(k.sizes() == v.sizes() && q.dim() == 4 && k.dim() == 4 &&
                  q.size(1) % k.size(1) == 0 && q.size(2) == k.size(2))
      << "ring attention of q " << q.sizes() << ", k " << k.sizes() << ", v " << v.sizes();
  CONVEYOR_ASSERT(!documents.defined() ||
                  (documents.dim() == 2 && documents.size(1) == q.size(2) * cp.size))
      << "document ids " << documents.sizes() << " for ring attention over " << cp.size
      << " ranks of " << q.size(2) << " positions";
  return RingFunction::apply(q, k, v, cp.group, documents.defined() ? documents : q,
                             documents.defined());
}

}  // namespace conveyor
