#include "conveyor/nn/transformer.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "conveyor/nn/layer.h"

namespace conveyor {
namespace {

AttentionWeights Weights(int64_t c, at::ScalarType dtype) {
  at::Generator gen = LayerInitGenerator(5, 0);
  AttentionWeights w;
  w.qkv_w = at::normal(0.0, 0.3, {3 * c, c}, gen).to(dtype);
  w.qkv_b = at::normal(0.0, 0.3, {3 * c}, gen).to(dtype);
  w.proj_w = at::normal(0.0, 0.3, {c, c}, gen).to(dtype);
  w.proj_b = at::normal(0.0, 0.3, {c}, gen).to(dtype);
  return w;
}

// Padding keys get no weight in every dtype: the real tokens' outputs equal those of the
// sequence without the padding, and a query with no real key stays finite. A fixed -1e9 mask
// value overflows fp16 and would turn such rows into NaN.
TEST(TransformerTest, MaskedKeysGetNoWeightInEveryDtype) {
  const int64_t c = 8, heads = 2, real = 3, t = 5;
  for (at::ScalarType dtype : {at::kFloat, at::kDouble, at::kBFloat16}) {
    const AttentionWeights w = Weights(c, dtype);
    at::Generator gen = LayerInitGenerator(6, 0);
    const at::Tensor x = at::normal(0.0, 1.0, {1, t, c}, gen).to(dtype);
    at::Tensor mask = at::zeros({1, t}, at::kBool);
    mask.narrow(1, 0, real).fill_(true);
    const at::Tensor padded = SelfAttention(x, w, heads, /*causal=*/false, mask);
    const at::Tensor alone = SelfAttention(x.narrow(1, 0, real).contiguous(), w, heads,
                                           /*causal=*/false, at::Tensor());
    const double tolerance = dtype == at::kBFloat16 ? 3e-2 : 1e-5;
    EXPECT_TRUE(at::allclose(padded.narrow(1, 0, real).to(at::kDouble), alone.to(at::kDouble),
                             tolerance, tolerance))
        << dtype;
    at::Tensor none = at::zeros({1, t}, at::kBool);
    EXPECT_TRUE(at::isfinite(SelfAttention(x, w, heads, /*causal=*/false, none)).all().item<bool>())
        << dtype;
  }
}

// A defined key mask takes the manual path (scores materialised); none takes the fused
// kernel where libtorch has one (2.x). With every key real both compute the same attention:
// outputs and the gradients of x and of every weight agree to fp32 rounding, causal or not,
// with and without selective recomputation. On libtorch 1.13 both runs take the manual path.
TEST(TransformerTest, FusedAttentionMatchesTheManualPath) {
  const int64_t n = 2, t = 7, c = 16, heads = 4;
  for (bool causal : {true, false}) {
    for (bool recompute : {false, true}) {
      std::vector<at::Tensor> results[2];
      for (int path = 0; path < 2; ++path) {
        AttentionWeights w = Weights(c, at::kFloat);
        for (at::Tensor* p : {&w.qkv_w, &w.qkv_b, &w.proj_w, &w.proj_b}) p->requires_grad_(true);
        at::Generator gen = LayerInitGenerator(7, 0);
        const at::Tensor x = at::normal(0.0, 1.0, {n, t, c}, gen).requires_grad_(true);
        const at::Tensor all_real = path == 0 ? at::ones({n, t}, at::kBool) : at::Tensor();
        const at::Tensor y = SelfAttention(x, w, heads, causal, all_real, recompute);
        const at::Tensor g = at::normal(0.0, 1.0, {n, t, c}, gen);
        y.backward(g);
        results[path] = {y.detach(),     x.grad(),        w.qkv_w.grad(),
                         w.qkv_b.grad(), w.proj_w.grad(), w.proj_b.grad()};
      }
      for (size_t i = 0; i < results[0].size(); ++i) {
        EXPECT_TRUE(at::allclose(results[0][i], results[1][i], 1e-4, 1e-5))
            << "tensor " << i << " causal " << causal << " recompute " << recompute << ": max diff "
            << (results[0][i] - results[1][i]).abs().max().item<double>();
      }
    }
  }
}

// Packed documents kept apart: each document's attention outputs in a packed sequence equal
// its own alone, on the fused path (no key mask) and the manual one (a key mask of all real
// tokens), causal or not, with and without recomputation of the scores.
TEST(TransformerTest, DocumentIdsKeepPackedDocumentsApart) {
  const int64_t h = 2, d = 4, t = 9;
  at::Generator gen = LayerInitGenerator(11, 0);
  const at::Tensor q = at::normal(0.0, 1.0, {2, h, t, d}, gen);
  const at::Tensor k = at::normal(0.0, 1.0, {2, h, t, d}, gen);
  const at::Tensor v = at::normal(0.0, 1.0, {2, h, t, d}, gen);
  // Sample 0: documents of 4 and 5 tokens; sample 1: 2, 3 and 4.
  const at::Tensor positions = at::tensor({0, 1, 2, 3, 0, 1, 2, 3, 4, 0, 1, 0, 1, 2, 0, 1, 2, 3},
                                          at::kLong)
                                   .view({2, t});
  const at::Tensor documents = DocumentIds(positions);
  EXPECT_TRUE(at::equal(documents[1], at::tensor({1, 1, 2, 2, 2, 3, 3, 3, 3}, at::kLong)));
  const std::vector<std::vector<std::pair<int64_t, int64_t>>> spans = {{{0, 4}, {4, 5}},
                                                                     {{0, 2}, {2, 3}, {5, 4}}};
  for (bool causal : {true, false}) {
    for (bool manual : {false, true}) {
      for (bool recompute : {false, true}) {
        const at::Tensor all_real = manual ? at::ones({2, t}, at::kBool) : at::Tensor();
        const at::Tensor packed = AttentionHeads(q, k, v, causal, all_real, recompute, documents);
        for (int64_t n = 0; n < 2; ++n) {
          for (const auto& [first, length] : spans[n]) {
            auto part = [&](const at::Tensor& x) {
              return x.narrow(0, n, 1).narrow(2, first, length);
            };
            const at::Tensor alone = AttentionHeads(part(q), part(k), part(v), causal,
                                                    at::Tensor(), false);
            EXPECT_TRUE(at::allclose(part(packed), alone, 1e-5, 1e-6))
                << "sample " << n << ", document at " << first << ", causal " << causal
                << ", manual " << manual << ", recompute " << recompute;
          }
        }
        // Without the document ids the second document sees the first.
        const at::Tensor mixed = AttentionHeads(q, k, v, causal, all_real, recompute);
        EXPECT_FALSE(at::allclose(mixed.narrow(2, 4, 5), packed.narrow(2, 4, 5), 1e-3, 1e-3));
      }
    }
  }
}

}  // namespace
}  // namespace conveyor
