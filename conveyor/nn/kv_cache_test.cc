#include "conveyor/nn/kv_cache.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <gtest/gtest.h>

#include "conveyor/common/error.h"
#include "conveyor/nn/gpt.h"
#include "conveyor/nn/layer.h"
#include "conveyor/nn/llama.h"

namespace conveyor {
namespace {

MicroBatch Cached(const at::Tensor& ids, int64_t position) {
  MicroBatch mb;
  mb.inputs = ids;
  mb.cache_position = position;
  return mb;
}

// Logits (n, T, V) of `ids` through every layer of `model`, at `position` (-1: no cache).
at::Tensor Run(const LayerList& model, const at::Tensor& ids, int64_t position) {
  at::NoGradGuard no_grad;
  LayerStack stack(model);
  return stack.Forward(ids, Cached(ids, position));
}

// Prefill of the first `prompt` tokens, then one token at a time: every position's logits
// equal those of the whole sequence run at once, which the cache never saw.
void ExpectCachedStepsAreTheWholeRun(const LayerList& model, const at::Tensor& ids, int prompt) {
  const int64_t t = ids.size(1);
  const at::Tensor whole = Run(model, ids, -1);  // (n, T, V)
  const at::Tensor first = Run(model, ids.narrow(1, 0, prompt), 0);
  EXPECT_TRUE(at::allclose(first, whole.narrow(1, 0, prompt), 1e-5, 1e-5));
  for (int64_t p = prompt; p < t; ++p) {
    const at::Tensor step = Run(model, ids.narrow(1, p, 1), p);
    EXPECT_TRUE(at::allclose(step, whole.narrow(1, p, 1), 1e-5, 1e-5))
        << "position " << p << ": max difference "
        << (step - whole.narrow(1, p, 1)).abs().max().item<double>();
  }
}

TEST(KvCacheTest, ALlamaGeneratingTokenByTokenComputesWhatTheWholeSequenceDoes) {
  LlamaConfig c;
  c.vocab = 40;
  c.hidden = 32;
  c.intermediate = 48;
  c.heads = 4;
  c.kv_heads = 2;  // grouped-query: the cache holds the key-value heads alone
  c.layers = 2;
  c.max_seq_len = 16;
  const at::Tensor ids = at::randint(c.vocab, {2, 11}, LayerInitGenerator(4, 0), at::kLong);
  ExpectCachedStepsAreTheWholeRun(BuildLlama(c, 3), ids, 4);
}

TEST(KvCacheTest, AGptGeneratingTokenByTokenComputesWhatTheWholeSequenceDoes) {
  GptConfig c;
  c.hidden = 32;
  c.heads = 4;
  c.layers = 2;
  c.max_seq_len = 16;
  const at::Tensor ids = at::randint(c.vocab, {2, 11}, LayerInitGenerator(4, 0), at::kLong);
  ExpectCachedStepsAreTheWholeRun(BuildGpt(c, 3), ids, 1);
}

TEST(KvCacheTest, APrefillStartsAfreshAndARunWithoutTheCacheEmptiesIt) {
  KvCache cache;
  const at::Tensor k = at::randn({1, 2, 3, 4}), v = at::randn({1, 2, 3, 4});
  const at::Tensor k1 = at::randn({1, 2, 1, 4}), v1 = at::randn({1, 2, 1, 4});
  cache.Extend(Cached(at::zeros({1, 3}, at::kLong), 0), k, v);
  auto [keys, values] = cache.Extend(Cached(at::zeros({1, 1}, at::kLong), 3), k1, v1);
  EXPECT_TRUE(at::equal(keys, at::cat({k, k1}, 2)));
  EXPECT_TRUE(at::equal(values, at::cat({v, v1}, 2)));
  // A new prefill replaces what was there.
  auto [fresh, unused] = cache.Extend(Cached(at::zeros({1, 1}, at::kLong), 0), k1, v1);
  EXPECT_TRUE(at::equal(fresh, k1));
  // Without the cache: k and v pass through, and the cache is emptied.
  auto [passed, passed_v] = cache.Extend(Cached(at::zeros({1, 1}, at::kLong), -1), k, v);
  EXPECT_TRUE(passed.is_same(k));
  EXPECT_THROW(cache.Extend(Cached(at::zeros({1, 1}, at::kLong), 1), k1, v1), UserError);
}

TEST(KvCacheTest, AStepThatDoesNotFollowTheCacheIsRefused) {
  KvCache cache;
  const at::Tensor k = at::randn({1, 2, 3, 4});
  cache.Extend(Cached(at::zeros({1, 3}, at::kLong), 0), k, k);
  try {
    cache.Extend(Cached(at::zeros({1, 1}, at::kLong), 5), k.narrow(2, 0, 1), k.narrow(2, 0, 1));
    FAIL() << "a step at position 5 after 3 cached positions was taken";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("position 5"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("holds 3 positions"), std::string::npos) << e.what();
  }
  // Two tokens at once after the prefill: refused too.
  EXPECT_THROW(
      cache.Extend(Cached(at::zeros({1, 2}, at::kLong), 3), k.narrow(2, 0, 2), k.narrow(2, 0, 2)),
      UserError);
}

}  // namespace
}  // namespace conveyor
