#include "conveyor/nn/context_parallel.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

#include <cmath>
#include <string>
#include <vector>

#include "conveyor/comm/local_transport.h"
#include "conveyor/comm/rank_threads.h"
#include "conveyor/common/error.h"
#include "conveyor/nn/layer.h"
#include "conveyor/nn/llama.h"

namespace conveyor {
namespace {

// Rank r of 2 holds chunks r and 3 - r of a sequence of 4 chunks; of 4, r and 7 - r.
TEST(ContextParallelTest, EachRankHoldsAnEarlyAndALateChunk) {
  const at::Device cpu(at::kCPU);
  EXPECT_TRUE(at::equal(ContextParallel{2, 0}.Positions(8, cpu), at::tensor({0, 1, 6, 7})));
  EXPECT_TRUE(at::equal(ContextParallel{2, 1}.Positions(8, cpu), at::tensor({2, 3, 4, 5})));
  EXPECT_TRUE(at::equal(ContextParallel{4, 1}.Positions(8, cpu), at::tensor({1, 6})));
  EXPECT_TRUE(at::equal(ContextParallel{}.Positions(3, cpu), at::tensor({0, 1, 2})));
  const at::Tensor ids = at::arange(16).view({2, 8});
  EXPECT_TRUE(at::equal(ContextShareOf(ids, ContextParallel{2, 1}),
                        at::tensor({2, 3, 4, 5, 10, 11, 12, 13}).view({2, 4})));
  try {
    CheckContextSplits(12, ContextParallel{4, 0});
    ADD_FAILURE() << "12 tokens cut into 8 chunks";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("divisible by 8"), std::string::npos) << e.what();
  }
}

// Whole-sequence causal attention, the reference.
at::Tensor CausalAttention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  const int64_t t = q.size(2);
  const at::Tensor scores = q.matmul(k.transpose(-2, -1)) / std::sqrt(double(q.size(-1)));
  const at::Tensor later = at::ones({t, t}, at::kBool).triu(1);
  return scores.masked_fill(later, -INFINITY).softmax(-1).matmul(v);
}

// Ring attention over 2 and 4 ranks of q, k, v (n, H or KV, T, d) gives each rank the rows of
// `want` (whole-sequence attention) at its positions, and the gradients of its queries, keys
// and values under `upstream` (the keys' and values' gathered from every rank's queries
// around the ring).
void ExpectRingAttentionIs(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                           const at::Tensor& upstream, const at::Tensor& want) {
  torch::autograd::backward({want}, {upstream});
  const int64_t t = q.size(2);
  for (int n : {2, 4}) {
    SCOPED_TRACE("cp " + std::to_string(n));
    const auto world = LocalWorld(n);
    RunRankThreads(world, [&](int r) {
      const ContextParallel cp{n, r, world[r].get()};
      const at::Tensor pos = cp.Positions(t, at::kCPU);
      // (n, H, T, d): the positions are dim 2 here.
      const auto share = [&](const at::Tensor& x) { return x.detach().index_select(2, pos); };
      const at::Tensor mq = share(q).requires_grad_(true), mk = share(k).requires_grad_(true),
                       mv = share(v).requires_grad_(true);
      const at::Tensor got = RingAttention(mq, mk, mv, cp);
      EXPECT_TRUE(at::allclose(got, share(want), 1e-5, 1e-6));
      torch::autograd::backward({got}, {upstream.index_select(2, pos)});
      EXPECT_TRUE(at::allclose(mq.grad(), share(q.grad()), 1e-4, 1e-6));
      EXPECT_TRUE(at::allclose(mk.grad(), share(k.grad()), 1e-4, 1e-6));
      EXPECT_TRUE(at::allclose(mv.grad(), share(v.grad()), 1e-4, 1e-6));
    });
  }
}

TEST(ContextParallelTest, RingAttentionIsWholeSequenceAttentionAtEachRanksPositions) {
  at::manual_seed(3);
  const at::Tensor q = at::randn({2, 3, 16, 4}).requires_grad_(true);
  const at::Tensor k = at::randn({2, 3, 16, 4}).requires_grad_(true);
  const at::Tensor v = at::randn({2, 3, 16, 4}).requires_grad_(true);
  ExpectRingAttentionIs(q, k, v, at::randn({2, 3, 16, 4}), CausalAttention(q, k, v));
}

// Grouped-query attention: 6 query heads over 2 key-value heads, which the ring carries as
// they are (their gradients the sums of their 3 query heads').
TEST(ContextParallelTest, RingAttentionCarriesKeyValueHeadsAsTheyAre) {
  at::manual_seed(4);
  const at::Tensor q = at::randn({1, 6, 8, 4}).requires_grad_(true);
  const at::Tensor k = at::randn({1, 2, 8, 4}).requires_grad_(true);
  const at::Tensor v = at::randn({1, 2, 8, 4}).requires_grad_(true);
  ExpectRingAttentionIs(q, k, v, at::randn({1, 6, 8, 4}),
                        CausalAttention(q, k.repeat_interleave(3, 1), v.repeat_interleave(3, 1)));
}

// A Llama's loss and gradients, as one rank of `cp` computes them (its positions' loss, its
// partial gradients).
struct Pass {
  double loss = 0;
  std::vector<int64_t> logits_shape;
  std::vector<at::Tensor> grads;  // in NamedParameters' order
};

Pass Backprop(const LlamaConfig& c, const MicroBatch& mb) {
  LayerStack stack(BuildLlama(c, 7));
  const at::Tensor logits = stack.Forward(mb.inputs, mb);
  const at::Tensor loss = stack.LossSum(logits, mb);
  torch::autograd::backward({loss});
  Pass pass{loss.item<double>(), logits.sizes().vec(), {}};
  for (const auto& [name, p] : stack.NamedParameters()) pass.grads.push_back(p.grad());
  return pass;
}

// The whole model over 2 and 4 CP ranks: the ranks' losses and gradients sum to the whole
// sequence's (the trainer's tests add TP, sequence parallelism, pipelines and replicas).
TEST(ContextParallelTest, ALlamaOverTheRanksIsTheWholeModel) {
  LlamaConfig c;
  c.vocab = 40;
  c.hidden = 32;
  c.intermediate = 48;
  c.heads = 4;
  c.kv_heads = 2;
  c.layers = 2;
  c.max_seq_len = 16;
  at::manual_seed(5);
  MicroBatch mb;
  mb.inputs = at::randint(40, {3, 16}, at::kLong);
  mb.targets = at::randint(40, {3, 16}, at::kLong);
  mb.targets[1][5] = -1;
  const Pass whole = Backprop(c, mb);
  for (int n : {2, 4}) {
    SCOPED_TRACE("cp " + std::to_string(n));
    const auto world = LocalWorld(n);
    std::vector<Pass> ranks(n);
    RunRankThreads(world, [&](int r) {
      LlamaConfig mine = c;
      mine.cp = ContextParallel{n, r, world[r].get()};
      ranks[r] = Backprop(mine, mb);
    });
    double loss = 0;
    for (const Pass& rank : ranks) {
      loss += rank.loss;
      EXPECT_EQ(rank.logits_shape, (std::vector<int64_t>{3, 16 / n, 40}));
    }
    EXPECT_NEAR(loss, whole.loss, 1e-4 * whole.loss);
    for (size_t i = 0; i < whole.grads.size(); ++i) {
      at::Tensor sum = at::zeros_like(whole.grads[i]);
      for (const Pass& rank : ranks) sum += rank.grads[i];
      EXPECT_TRUE(at::allclose(sum, whole.grads[i], 1e-4, 1e-5)) << "parameter " << i;
    }
  }
}

}  // namespace
}  // namespace conveyor
