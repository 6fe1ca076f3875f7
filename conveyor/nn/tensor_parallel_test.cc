#include "conveyor/nn/tensor_parallel.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

#include <algorithm>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "conveyor/comm/local_transport.h"
#include "conveyor/comm/rank_threads.h"
#include "conveyor/common/error.h"
#include "conveyor/module/weight_grad_store.h"
#include "conveyor/nn/classifier.h"
#include "conveyor/nn/classifier_testing.h"
#include "conveyor/nn/gpt.h"
#include "conveyor/nn/layer.h"
#include "conveyor/nn/llama.h"
#include "conveyor/nn/vocab_parallel.h"

namespace conveyor {
namespace {

constexpr int kKey = 7;  // the micro-batch key of the deferred weight gradients

using Named = std::map<std::string, at::Tensor>;

// One forward and backward of a model (or of one TP rank's shard of it).
struct Pass {
  double loss = 0;
  std::vector<int64_t> output_shape;  // of the last layer
  Named params;                       // as held (a TP rank's shards)
  Named grads;                        // as held; the two copies of a tied weight summed
};

// Runs `layers` on mb, loss = LossSum, backward. With `defer` the forward records into a store
// that defers kKey, and the test checks the linear weights wait for W before running it.
Pass Backprop(const LayerList& layers, const MicroBatch& mb, bool defer) {
  LayerStack stack(layers);
  WeightGradStore store;
  store.SetDeferring(kKey, defer);
  at::Tensor output;
  {
    WeightGradStore::Recording recording(&store, kKey);
    output = stack.Forward(mb.inputs, mb);
  }
  const at::Tensor loss = stack.LossSum(output, mb);
  torch::autograd::backward({loss});
  const NamedTensors named = stack.NamedParameters();
  if (defer) {
    for (const auto& [name, p] : named) {
      if (name.find("mlp.fc.weight") != std::string::npos) {
        EXPECT_FALSE(p.grad().defined()) << name << " should wait for W";
      }
    }
    EXPECT_GT(store.pending(kKey), 0u);
    store.SetDeferring(kKey, false);
    store.Run(kKey);
  }
  Pass pass;
  pass.loss = loss.item<double>();
  pass.output_shape = output.sizes().vec();
  for (const auto& [name, p] : named) {
    EXPECT_TRUE(p.grad().defined()) << name;
    pass.params[name] = p.detach();
    auto [it, fresh] = pass.grads.emplace(name, p.grad());
    if (!fresh) it->second = it->second + p.grad();
  }
  return pass;
}

// What one TP rank computed: its pass, and its parameters and gradients gathered whole.
struct RankPass {
  Pass local;
  ParameterSpecs specs;  // as the rank's layers declared them
  Named full_params, full_grads;
};

using BuildFor = std::function<LayerList(const TensorParallel& tp)>;

// `whole`: the unsharded model's pass, whose tensors give the extents to gather to;
// `kv_replicas`: the ranks holding each key-value head of a Llama (KvReplicas), else 1. The
// gradients of parameters declared partial over the TP ranks (ReplicatedSpec) are summed over
// them, as the trainer sums them.
std::vector<RankPass> BackpropTensorParallel(int p, const BuildFor& build, const MicroBatch& mb,
                                             bool defer, const Pass& whole, int kv_replicas = 1,
                                             bool sequence_parallel = false) {
  const auto world = LocalWorld(p);
  std::vector<RankPass> ranks(p);
  RunRankThreads(world, [&](int r) {
    TensorParallel tp{p, r, world[r].get(), kv_replicas};
    tp.sequence_parallel = sequence_parallel;
    RankPass& out = ranks[r];
    const LayerList layers = build(tp);
    out.specs = ParameterSpecsOf(layers);
    out.local = Backprop(layers, mb, defer);
    for (auto& [name, grad] : out.local.grads) {  // the same order on every rank
      if (out.specs.Of(name).grad_sum == ReplicatedSpec(true).grad_sum) {
        std::vector<at::Tensor> sum = {grad.clone()};
        world[r]->AllReduceSum(sum);
        grad = sum[0];
      }
    }
    for (const auto& [name, local] : out.local.params) {  // the same order on every rank
      const TensorParallelSplit split = out.specs.Of(name).tp;
      const int64_t extent = split.replicated() ? 0 : whole.params.at(name).size(split.dim);
      out.full_params[name] = GatherShards(local, split, tp, extent);
      out.full_grads[name] = GatherShards(out.local.grads.at(name), split, tp, extent);
    }
  });
  return ranks;
}

// max |actual - expected| / max |expected|
double RelativeError(const at::Tensor& actual, const at::Tensor& expected) {
  EXPECT_EQ(actual.sizes(), expected.sizes());
  if (actual.sizes() != expected.sizes()) return 1;
  const double scale = std::max(expected.abs().max().item<double>(), 1e-12);
  return (actual - expected).abs().max().item<double>() / scale;
}

// The TP ranks computed the unsharded model's loss and gradients: parameters gather to the
// unsharded ones exactly, split parameters are really split, replicated parameters' gradients
// are identical on every rank, and so are those of the ranks holding one key-value head's
// replicas. Returns the largest relative error.
double ExpectMatches(const Pass& whole, const std::vector<RankPass>& ranks) {
  const int p = static_cast<int>(ranks.size());
  double worst = 0;
  for (int r = 0; r < p; ++r) {
    const RankPass& rank = ranks[r];
    SCOPED_TRACE("tp rank " + std::to_string(r) + " of " + std::to_string(p));
    EXPECT_NEAR(rank.local.loss, whole.loss, 1e-5 * std::abs(whole.loss));
    worst = std::max(worst, std::abs(rank.local.loss - whole.loss) / std::abs(whole.loss));
    EXPECT_EQ(rank.full_params.size(), whole.params.size());
    for (const auto& [name, expected] : whole.params) {
      SCOPED_TRACE(name);
      if (!rank.full_params.count(name)) {
        ADD_FAILURE() << "missing on the TP rank";
        continue;
      }
      EXPECT_TRUE(at::equal(rank.full_params.at(name), expected));
      const TensorParallelSplit split = rank.specs.Of(name).tp;
      const at::Tensor& local = rank.local.params.at(name);
      if (split.replicated()) {
        EXPECT_TRUE(at::equal(rank.local.grads.at(name), ranks[0].local.grads.at(name)))
            << "a replicated gradient differs between TP ranks";
      } else {
        const ShardRows part = ShardRowsOf(split, expected.size(split.dim), p, r);
        EXPECT_EQ(local.size(split.dim), part.rows * split.blocks);
        EXPECT_TRUE(at::equal(local, TakeShard(expected, split, p, r)));
        // A padded vocabulary's zero rows get no gradient: they stay zero through training.
        const at::Tensor padding =
            rank.local.grads.at(name).narrow(split.dim, part.real, part.rows - part.real);
        EXPECT_EQ(padding.abs().sum().item<double>(), 0.0);
        const int first = r - r % split.replicas;  // the rank holding the part's first replica
        EXPECT_TRUE(at::equal(rank.local.grads.at(name), ranks[first].local.grads.at(name)))
            << "replicas of a key-value head differ between TP ranks " << first << " and " << r;
      }
      const double error = RelativeError(rank.full_grads.at(name), whole.grads.at(name));
      EXPECT_LE(error, 1e-5);
      worst = std::max(worst, error);
    }
  }
  return worst;
}

// Keeps the largest relative error of a TP size in the test's XML report (--gtest_output=xml).
void RecordError(int p, double error) {
  std::ostringstream text;
  text << error;
  ::testing::Test::RecordProperty("max_relative_error_tp" + std::to_string(p), text.str());
}

GptConfig TinyGpt() {
  GptConfig c;
  c.vocab = 32;
  c.hidden = 32;
  c.heads = 4;
  c.layers = 2;
  c.max_seq_len = 8;
  return c;
}

// n sequences of length T: random lengths with padding after them (masked, target -1), and
// a few more targets ignored inside.
MicroBatch TokenMicroBatch(int vocab, int64_t n, int64_t t, uint64_t seed) {
  at::Generator gen = LayerInitGenerator(seed, 1000);
  MicroBatch mb;
  mb.inputs = at::randint(vocab, {n, t}, gen, at::kLong);
  mb.targets = at::randint(vocab, {n, t}, gen, at::kLong);
  mb.attention_mask = at::ones({n, t}, at::kBool);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t length = t - 2 * i;
    mb.attention_mask[i].narrow(0, length, t - length).fill_(false);
    mb.targets[i].narrow(0, length, t - length).fill_(-1);
  }
  mb.targets[0][1] = -1;
  return mb;
}

void ExpectGptMatches(GptConfig c, int p, bool defer, bool sequence_parallel = false) {
  const MicroBatch mb = TokenMicroBatch(c.vocab, 3, 8, 11);
  const Pass whole = Backprop(BuildGpt(c, 5), mb, false);
  const auto ranks = BackpropTensorParallel(
      p,
      [&](const TensorParallel& tp) {
        GptConfig sharded = c;
        sharded.tp = tp;
        const LayerList layers = BuildGpt(sharded, 5);
        // The activations between layers: this rank's positions under sequence parallelism.
        EXPECT_EQ(layers[1]->InputShape(mb),
                  (std::vector<int64_t>{3, sequence_parallel ? 8 / p : 8, c.hidden}));
        // Its norms' gradients then cover its positions: summed over the TP ranks.
        EXPECT_EQ(ParameterSpecsOf(layers).Of("blocks.0.ln1.weight").grad_sum,
                  ReplicatedSpec(sequence_parallel).grad_sum);
        return layers;
      },
      mb, defer, whole, /*kv_replicas=*/1, sequence_parallel);
  for (const RankPass& rank : ranks) {
    EXPECT_EQ(rank.local.output_shape,
              (std::vector<int64_t>{3, 8, VocabularyRowsPerRank(c.vocab, p)}));
    EXPECT_EQ(rank.local.params.at("blocks.1.attn.qkv.weight").sizes(),
              (std::vector<int64_t>{3 * c.hidden / p, c.hidden}));
  }
  RecordError(p, ExpectMatches(whole, ranks));
}

TEST(TensorParallelTest, GptMatchesTheUnshardedModel) {
  for (int p : {2, 4}) {
    SCOPED_TRACE("tp " + std::to_string(p));
    ExpectGptMatches(TinyGpt(), p, /*defer=*/false);
  }
}

TEST(TensorParallelTest, GptWithTiedEmbeddingsMatchesTheUnshardedModel) {
  GptConfig c = TinyGpt();
  c.tie_embeddings = true;
  c.recompute_attention = true;
  for (int p : {2, 4}) {
    SCOPED_TRACE("tp " + std::to_string(p));
    ExpectGptMatches(c, p, /*defer=*/false);
  }
}

// GPT-2's 50257 tokens divide by no TP size: a vocabulary of 29 holds 15 rows on each of 2
// ranks (rank 1: one of padding), 8 on each of 4 (rank 3: five real, three of padding);
// untied, then tied with deferred weight gradients.
TEST(TensorParallelTest, AVocabularyTheRanksDoNotDivideIsPaddedAndMatches) {
  GptConfig c = TinyGpt();
  c.vocab = 29;
  for (int p : {2, 4}) {
    SCOPED_TRACE("tp " + std::to_string(p) + ", untied");
    ExpectGptMatches(c, p, /*defer=*/false);
  }
  c.tie_embeddings = true;
  SCOPED_TRACE("tp 4, tied");
  ExpectGptMatches(c, 4, /*defer=*/true);
}

TEST(TensorParallelTest, DeferredWeightGradientsMatchTheUnshardedModel) {
  GptConfig c = TinyGpt();
  c.tie_embeddings = true;
  ExpectGptMatches(c, 2, /*defer=*/true);
}

// 8 heads, 30 tokens (padded to 8 rows a rank at tp 4), d = 4.
LlamaConfig SmallLlama(int kv_heads) {
  LlamaConfig c;
  c.vocab = 30;
  c.hidden = 32;
  c.intermediate = 48;
  c.heads = 8;
  c.kv_heads = kv_heads;
  c.layers = 2;
  c.max_seq_len = 8;
  return c;
}

// The Llama `c` over p ranks computes the unsharded one's loss and gradients; each rank holds
// `kv_rows` rows of k_proj and v_proj.
void ExpectLlamaMatches(const LlamaConfig& c, int p, bool defer, int64_t kv_rows,
                        bool sequence_parallel = false) {
  const int replicas = KvReplicas(c.kv_heads, p);
  const MicroBatch mb = TokenMicroBatch(c.vocab, 3, 8, 13);
  const Pass whole = Backprop(BuildLlama(c, 21), mb, false);
  const auto ranks = BackpropTensorParallel(
      p,
      [&](const TensorParallel& tp) {
        LlamaConfig sharded = c;
        sharded.tp = tp;
        const LayerList layers = BuildLlama(sharded, 21);
        EXPECT_EQ(layers[0]->OutputShape(mb),
                  (std::vector<int64_t>{3, sequence_parallel ? 8 / p : 8, c.hidden}));
        return layers;
      },
      mb, defer, whole, replicas, sequence_parallel);
  for (const RankPass& rank : ranks) {
    EXPECT_EQ(rank.local.output_shape,
              (std::vector<int64_t>{3, 8, VocabularyRowsPerRank(c.vocab, p)}));
    EXPECT_EQ(rank.local.params.at("model.layers.1.self_attn.k_proj.weight").sizes(),
              (std::vector<int64_t>{kv_rows, c.hidden}));
    EXPECT_EQ(rank.local.params.at("model.layers.0.mlp.down_proj.weight").sizes(),
              (std::vector<int64_t>{c.hidden, c.intermediate / p}));
  }
  RecordError(p, ExpectMatches(whole, ranks));
}

// Llama's heads split with their key-value heads (2 query heads per key-value head), the
// SwiGLU units and the vocabulary; deferred weight gradients at tp 2, tied embeddings at 4.
TEST(TensorParallelTest, LlamaMatchesTheUnshardedModel) {
  LlamaConfig c = SmallLlama(4);
  for (int p : {2, 4}) {
    SCOPED_TRACE("tp " + std::to_string(p));
    c.tie_embeddings = p == 4;
    ExpectLlamaMatches(c, p, /*defer=*/p == 2, /*kv_rows=*/4 * 4 / p);
  }
}

// Fewer key-value heads than ranks (Llama 3 70B's 8 over tp 16): 2 of them over 4 ranks, each
// held by 2 ranks, and over 8 ranks (one query head each), each held by 4; tied and deferred
// at tp 4, untied at 8. Each rank holds one head's 4 rows.
TEST(TensorParallelTest, LlamaWithKeyValueHeadsReplicatedMatchesTheUnshardedModel) {
  LlamaConfig c = SmallLlama(2);
  for (int p : {4, 8}) {
    SCOPED_TRACE("tp " + std::to_string(p));
    EXPECT_EQ(KvReplicas(c.kv_heads, p), p / 2);
    c.tie_embeddings = p == 4;
    ExpectLlamaMatches(c, p, /*defer=*/p == 4, /*kv_rows=*/4);
  }
}

TEST(TensorParallelTest, ClassifierMatchesTheUnshardedModel) {
  ClassifierConfig c = SmallClassifier();
  c.hidden = 32;
  c.heads = 4;
  c.layers = 2;
  c.max_seq_len = 8;
  const MicroBatch mb = ClassifierMicroBatch(c, 4, 8, 3);
  const Pass whole = Backprop(BuildClassifier(c, 9), mb, false);
  for (int p : {2, 4}) {
    SCOPED_TRACE("tp " + std::to_string(p));
    const auto ranks = BackpropTensorParallel(
        p,
        [&](const TensorParallel& tp) {
          ClassifierConfig sharded = c;
          sharded.tp = tp;
          return BuildClassifier(sharded, 9);
        },
        mb, /*defer=*/p == 2, whole);
    for (const RankPass& rank : ranks) {
      EXPECT_EQ(rank.local.output_shape, (std::vector<int64_t>{4, c.classes}));
      EXPECT_EQ(rank.local.params.at("blocks.0.mlp.proj.weight").sizes(),
                (std::vector<int64_t>{c.hidden, 4 * c.hidden / p}));
    }
    RecordError(p, ExpectMatches(whole, ranks));
  }
}

// Rank t holds part t of each of q, k and v: not a plain slice of the stacked rows. The GPT
// declares its parameters' layouts as gpt.h's table says.
TEST(TensorParallelTest, QkvShardsTakeTheirHeadsFromEachOfQKV) {
  GptConfig c = TinyGpt();
  c.layers = 4;
  const ParameterSpecs specs = ParameterSpecsOf(BuildGpt(c, 5));
  const at::Tensor qkv_bias = at::arange(12);  // C = 4: q 0..3, k 4..7, v 8..11
  const TensorParallelSplit split = specs.Of("blocks.0.attn.qkv.bias").tp;
  EXPECT_EQ(split, FusedColumnParallel(3).tp);
  EXPECT_TRUE(at::equal(TakeShard(qkv_bias, split, 2, 1), at::tensor({2, 3, 6, 7, 10, 11})));
  const at::Tensor proj = at::arange(8).view({2, 4});
  EXPECT_TRUE(at::equal(TakeShard(proj, specs.Of("blocks.3.attn.proj.weight").tp, 2, 1),
                        at::tensor({2, 3, 6, 7}).view({2, 2})));
  EXPECT_TRUE(specs.Of("blocks.0.attn.proj.bias").tp.replicated());
  EXPECT_TRUE(specs.Of("embed.wpe").tp.replicated());
  EXPECT_EQ(specs.Of("blocks.2.mlp.fc.bias").tp, ColumnParallel().tp);
  EXPECT_EQ(specs.Of("blocks.2.mlp.proj.weight").tp, RowParallel().tp);
  EXPECT_EQ(specs.Of("head.lm.weight").tp, VocabParallel().tp);
  EXPECT_EQ(specs.Of("embed.wte").tp, VocabParallel().tp);

  const auto world = LocalWorld(2);
  RunRankThreads(world, [&](int r) {
    const TensorParallel tp{2, r, world[r].get()};
    const at::Tensor back = GatherShards(TakeShard(qkv_bias, split, 2, r), split, tp, 12);
    EXPECT_TRUE(at::equal(back, qkv_bias));
  });
}

// Sequence parallelism: each layer matches the unsharded model with the activations between
// layers split along the sequence, under every variant the plain TP tests cover: tp 2 and 4,
// tied, recomputed attention, a padded vocabulary, deferred weight gradients.
TEST(TensorParallelTest, SequenceParallelGptMatchesTheUnshardedModel) {
  GptConfig c = TinyGpt();
  ExpectGptMatches(c, 2, /*defer=*/true, /*sequence_parallel=*/true);
  c.tie_embeddings = true;
  c.recompute_attention = true;
  c.vocab = 29;
  ExpectGptMatches(c, 4, /*defer=*/false, /*sequence_parallel=*/true);
}

// Key-value heads split (tp 2) and replicated (2 heads over 4 ranks), each-head query and key
// norms (Qwen3's, whose gradients cover this rank's heads: summed over the TP ranks with or
// without sequence parallelism), deferred weight gradients.
TEST(TensorParallelTest, SequenceParallelLlamaMatchesTheUnshardedModel) {
  LlamaConfig c = SmallLlama(4);
  ExpectLlamaMatches(c, 2, /*defer=*/true, /*kv_rows=*/8, /*sequence_parallel=*/true);
  c = SmallLlama(2);
  c.qk_norm = QkNorm::kHead;
  c.qkv_bias = true;
  ExpectLlamaMatches(c, 4, /*defer=*/false, /*kv_rows=*/4, /*sequence_parallel=*/true);
  ExpectLlamaMatches(c, 4, /*defer=*/true, /*kv_rows=*/4, /*sequence_parallel=*/false);
}

// The regions' edges on two ranks, rank r holding positions [2r, 2r + 2) of a sequence of 4.
TEST(TensorParallelTest, RegionEdgesGatherAndScatterTheSequence) {
  const auto world = LocalWorld(2);
  const at::Tensor all = at::arange(12, at::kFloat).view({1, 4, 3});  // (n, T, C)
  const at::Tensor w0 = at::arange(6, at::kFloat).view({2, 3}), w1 = w0 * 2 - 1;
  RunRankThreads(world, [&](int r) {
    for (bool sequence_parallel : {false, true}) {
      SCOPED_TRACE(sequence_parallel ? "sequence parallel" : "replicated");
      TensorParallel tp{2, r, world[r].get()};
      tp.sequence_parallel = sequence_parallel;
      const at::Tensor mine = sequence_parallel ? all.narrow(1, 2 * r, 2) : all;
      const at::Tensor x = mine.clone().requires_grad_(true);
      const at::Tensor w = (r == 0 ? w0 : w1).clone().requires_grad_(true);
      const at::Tensor b = at::full({2}, r + 1.0).requires_grad_(true);
      // Column: every position's product on each rank; the input gradient summed over the
      // ranks' products (the key-value scale halving the second's part).
      const at::Tensor y = ColumnParallelLinears(x, {{w, b, r == 0 ? 1.0 : 0.5}}, tp)[0];
      EXPECT_TRUE(at::allclose(y, at::linear(all, w.detach(), b.detach())));
      torch::autograd::backward({y.sum()});
      const at::Tensor grad_all = at::ones({1, 4, 2}).matmul(w0 + 0.5 * w1);
      EXPECT_TRUE(
          at::allclose(x.grad(), sequence_parallel ? grad_all.narrow(1, 2 * r, 2) : grad_all));
      EXPECT_TRUE(at::allclose(w.grad(), at::ones({2, 4}).matmul(all.view({4, 3}))));
      EXPECT_TRUE(at::allclose(b.grad(), at::full({2}, 4.0)));
      // Row exit: the sum of the ranks' (r + 1) all, whole or this rank's positions; the
      // backward hands every position's gradient back.
      const at::Tensor z = (all * (r + 1.0)).requires_grad_(true);
      const at::Tensor out = ReduceOutOfTensorParallel(z, tp);
      EXPECT_TRUE(at::equal(out, sequence_parallel ? (all * 3).narrow(1, 2 * r, 2) : all * 3));
      torch::autograd::backward({(out * (r + 1.0)).sum()});
      const at::Tensor expected =
          sequence_parallel ? at::cat({at::full({1, 2, 3}, 1.0), at::full({1, 2, 3}, 2.0)}, 1)
                            : at::full({1, 4, 3}, r + 1.0);
      EXPECT_TRUE(at::equal(z.grad(), expected));
    }
    // Tokens of a rank: its positions of every sequence, and back.
    const TensorParallel tp{2, r, world[r].get()};
    const at::Tensor x = at::arange(16, at::kFloat).view({2, 4, 2}).requires_grad_(true);
    const at::Tensor mine = TokensOfTensorParallelRank(x, tp);
    EXPECT_TRUE(at::equal(mine, x.detach().narrow(1, 2 * r, 2)));
    const at::Tensor back = TokensOfEveryTensorParallelRank(mine * (r + 1.0), tp);
    EXPECT_TRUE(
        at::equal(back, at::cat({x.detach().narrow(1, 0, 2), x.detach().narrow(1, 2, 2) * 2}, 1)));
    torch::autograd::backward({back.sum()});
    EXPECT_TRUE(
        at::equal(x.grad(), at::cat({at::full({2, 2, 2}, 1.0), at::full({2, 2, 2}, 2.0)}, 1)));
  });
}

// The UserError `build` throws names every fragment of `expected`.
void ExpectRefused(const std::function<void()>& build, const std::vector<std::string>& expected) {
  try {
    build();
    ADD_FAILURE() << "accepted a bad tensor-parallel configuration";
  } catch (const UserError& e) {
    for (const std::string& part : expected) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  }
}

TEST(TensorParallelTest, BadConfigurationsAreRefusedNamingTheNumbers) {
  const auto world = LocalWorld(4);  // the builds fail before any collective
  const auto world3 = LocalWorld(3);
  auto gpt = [&](int size, int rank, Transport* group, void (*edit)(GptConfig&)) {
    return [=] {
      GptConfig c = TinyGpt();
      c.tp = {size, rank, group};
      edit(c);
      BuildGpt(c, 1);
    };
  };
  auto same = [](GptConfig&) {};
  ExpectRefused(gpt(3, 0, world3[0].get(), same), {"heads (4)", "size (3)"});
  ExpectRefused(gpt(4, 0, world[0].get(), [](GptConfig& c) { c.vocab = 5; }),
                {"vocabulary of 5 tokens cannot be split over 4", "leave rank 3 only padding"});
  ExpectRefused(gpt(2, 0, nullptr, same), {"size 2 needs the TP group"});
  ExpectRefused(gpt(2, 2, world[0].get(), same), {"rank 2 is outside [0, 2)"});
  ExpectRefused(gpt(4, 0, world[1].get(), same), {"rank 1 of 4", "rank 0 of 4"});
  ExpectRefused(gpt(0, 0, nullptr, same), {"at least 1, got 0"});
  ExpectRefused(
      [&] {
        ClassifierConfig c = SmallClassifier();  // 2 heads
        c.tp = {4, 0, world[0].get()};
        BuildClassifier(c, 1);
      },
      {"heads (2)", "size (4)"});
  ExpectRefused(
      [] {
        TakeShard(at::zeros({6, 2}), {0, 3}, 4, 0);
      },
      {"extent of 6 along dim 0", "3 block(s) of 4"});
}

// Both refuse before any collective, on every rank (a failed world stays failed: one each).
TEST(TensorParallelTest, OutOfRangeTargetsAndIdsAreRefused) {
  const at::Tensor logits = at::zeros({2, 4});  // V = 8 over 2 ranks
  ExpectRefused(
      [&] {
        const auto world = LocalWorld(2);
        RunRankThreads(world, [&](int r) {
          VocabParallelCrossEntropySum(logits, at::tensor({3, 8}), {2, r, world[r].get()}, 8);
        });
      },
      {"targets must be in [-1, 8)", "got values from 3 to 8"});
  ExpectRefused(
      [&] {
        const auto world = LocalWorld(2);
        RunRankThreads(world, [&](int r) {
          VocabParallelEmbedding(at::tensor({-1, 2}), at::zeros({4, 3}), {2, r, world[r].get()}, 8);
        });
      },
      {"token ids must be in [0, 8)"});
}

}  // namespace
}  // namespace conveyor
