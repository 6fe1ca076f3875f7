#include "conveyor/nn/transformer.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "conveyor/nn/layer.h"

namespace conveyor {
namespace {

AttentionWeights Weights(int64_t c, at::ScalarType dtype) {
  at::Generator gen = LayerGenerator(5, 0);
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
    at::Generator gen = LayerGenerator(6, 0);
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

}  // namespace
}  // namespace conveyor
