#include "conveyor/nn/classifier.h"

#include <ATen/ATen.h>

#include <string>

#include "conveyor/common/error.h"
#include "conveyor/nn/linear.h"
#include "conveyor/nn/transformer.h"

namespace conveyor {
namespace {

constexpr double kInitStd = 0.02;  // BERT's initializer_range

class Embedding : public Layer {
 public:
  Embedding(const ClassifierConfig& c, uint64_t seed) : config_(c) {
    at::Generator gen = LayerInitGenerator(seed, 0);
    tok_ = NormalParam(gen, {c.vocab, c.hidden}, kInitStd);
    pos_ = NormalParam(gen, {c.max_seq_len, c.hidden}, kInitStd);
    ln_w_ = OnesParam({c.hidden});
    ln_b_ = ZerosParam({c.hidden});
  }

  // ids (n, T) -> (n, T, C)
  at::Tensor Forward(const at::Tensor& ids, const MicroBatch& mb) override {
    const int64_t t = ids.size(1);
    CONVEYOR_CHECK(t <= config_.max_seq_len)
        << "sequence length " << t << " exceeds the model's max_seq_len " << config_.max_seq_len;
    at::Tensor x = at::embedding(tok_, ids) + pos_.narrow(0, 0, t).unsqueeze(0);
    return at::layer_norm(x, {config_.hidden}, ln_w_, ln_b_);
  }

  NamedTensors NamedParameters() override {
    return {{"embed.tok", tok_},
            {"embed.pos", pos_},
            {"embed.ln.weight", ln_w_},
            {"embed.ln.bias", ln_b_}};
  }
  std::vector<int64_t> InputShape(const MicroBatch& mb) const override { return TokenShape(mb); }
  std::vector<int64_t> OutputShape(const MicroBatch& mb) const override {
    return HiddenShape(mb, config_.hidden);
  }

 private:
  ClassifierConfig config_;
  at::Tensor tok_;          // (V, C) token embeddings
  at::Tensor pos_;          // (max_seq_len, C) position embeddings
  at::Tensor ln_w_, ln_b_;  // (C), (C): embedding layer norm
};

class Block : public Layer {
 public:
  Block(const ClassifierConfig& c, uint64_t seed, int block)
      : config_(c), prefix_("blocks." + std::to_string(block) + ".") {
    at::Generator gen = LayerInitGenerator(seed, block + 1);
    const int64_t h = c.hidden;
    auto shard = [&](const char* name, const ParameterSpec& spec, const at::Tensor& full) {
      return ShardParam(prefix_ + name, spec, full, c.tp, specs_);
    };
    attn_.qkv_w =
        shard("attn.qkv.weight", FusedColumnParallel(3), NormalParam(gen, {3 * h, h}, kInitStd));
    attn_.qkv_b = shard("attn.qkv.bias", FusedColumnParallel(3), ZerosParam({3 * h}));
    attn_.proj_w = shard("attn.proj.weight", RowParallel(), NormalParam(gen, {h, h}, kInitStd));
    attn_.proj_b = ZerosParam({h});
    ln1_w_ = OnesParam({h});
    ln1_b_ = ZerosParam({h});
    fc_w_ = shard("mlp.fc.weight", ColumnParallel(), NormalParam(gen, {4 * h, h}, kInitStd));
    fc_b_ = shard("mlp.fc.bias", ColumnParallel(), ZerosParam({4 * h}));
    fc2_w_ = shard("mlp.proj.weight", RowParallel(), NormalParam(gen, {h, 4 * h}, kInitStd));
    fc2_b_ = ZerosParam({h});
    ln2_w_ = OnesParam({h});
    ln2_b_ = ZerosParam({h});
  }

  // x (n, T, C) -> (n, T, C)
  at::Tensor Forward(const at::Tensor& x, const MicroBatch& mb) override {
    const int64_t c = config_.hidden;
    at::Tensor a = SelfAttention(x, attn_, config_.heads, /*causal=*/false, mb.attention_mask,
                                 config_.recompute_attention, config_.tp);
    a = at::layer_norm(x + a, {c}, ln1_w_, ln1_b_);
    return at::layer_norm(a + Mlp(a, fc_w_, fc_b_, fc2_w_, fc2_b_, config_.tp), {c}, ln2_w_,
                          ln2_b_);
  }

  NamedTensors NamedParameters() override {
    return {{prefix_ + "attn.qkv.weight", attn_.qkv_w},
            {prefix_ + "attn.qkv.bias", attn_.qkv_b},
            {prefix_ + "attn.proj.weight", attn_.proj_w},
            {prefix_ + "attn.proj.bias", attn_.proj_b},
            {prefix_ + "ln1.weight", ln1_w_},
            {prefix_ + "ln1.bias", ln1_b_},
            {prefix_ + "mlp.fc.weight", fc_w_},
            {prefix_ + "mlp.fc.bias", fc_b_},
            {prefix_ + "mlp.proj.weight", fc2_w_},
            {prefix_ + "mlp.proj.bias", fc2_b_},
            {prefix_ + "ln2.weight", ln2_w_},
            {prefix_ + "ln2.bias", ln2_b_}};
  }
  std::vector<int64_t> InputShape(const MicroBatch& mb) const override {
    return HiddenShape(mb, config_.hidden);
  }
  std::vector<int64_t> OutputShape(const MicroBatch& mb) const override {
    return HiddenShape(mb, config_.hidden);
  }

 private:
  ClassifierConfig config_;
  std::string prefix_;
  // p = config_.tp.size: split parameters hold this rank's part, the others are replicated.
  AttentionWeights attn_;     // (3C/p, C), (3C/p), (C, C/p), (C): this rank's heads
  at::Tensor ln1_w_, ln1_b_;  // (C), (C): layer norm after attention
  at::Tensor fc_w_, fc_b_;    // (4C/p, C), (4C/p): MLP up-projection
  at::Tensor fc2_w_, fc2_b_;  // (C, 4C/p), (C): MLP down-projection
  at::Tensor ln2_w_, ln2_b_;  // (C), (C): layer norm after the MLP
};

class Head : public Layer {
 public:
  Head(const ClassifierConfig& c, uint64_t seed) : config_(c) {
    at::Generator gen = LayerInitGenerator(seed, c.layers + 1);
    pre_w_ = NormalParam(gen, {c.hidden, c.hidden}, kInitStd);
    pre_b_ = ZerosParam({c.hidden});
    out_w_ = NormalParam(gen, {c.classes, c.hidden}, kInitStd);
    out_b_ = ZerosParam({c.classes});
  }

  // x (n, T, C) -> logits (n, K)
  at::Tensor Forward(const at::Tensor& x, const MicroBatch& mb) override {
    at::Tensor pooled;  // (n, C)
    if (mb.attention_mask.defined()) {
      at::Tensor real = mb.attention_mask.to(x.scalar_type()).unsqueeze(-1);  // (n, T, 1)
      pooled = (x * real).sum(1) / real.sum(1).clamp_min(1);
    } else {
      pooled = x.mean(1);
    }
    return Linear(at::relu(Linear(pooled, pre_w_, pre_b_)), out_w_, out_b_);
  }

  bool has_loss() const override { return true; }

  // logits (n, K), targets (n,) -> summed cross-entropy over targets >= 0
  at::Tensor LossSum(const at::Tensor& logits, const MicroBatch& mb) override {
    CONVEYOR_CHECK(mb.targets.dim() == 1 && mb.targets.size(0) == logits.size(0))
        << "the classifier wants one target per sample, shape (" << logits.size(0) << "), got "
        << mb.targets.sizes();
    return at::cross_entropy_loss(logits.to(at::kFloat), mb.targets, /*weight=*/{},
                                  at::Reduction::Sum,
                                  /*ignore_index=*/-1);
  }

  NamedTensors NamedParameters() override {
    return {{"head.pre.weight", pre_w_},
            {"head.pre.bias", pre_b_},
            {"head.out.weight", out_w_},
            {"head.out.bias", out_b_}};
  }
  std::vector<int64_t> InputShape(const MicroBatch& mb) const override {
    return HiddenShape(mb, config_.hidden);
  }
  std::vector<int64_t> OutputShape(const MicroBatch& mb) const override {
    return {mb.size(), config_.classes};
  }

 private:
  ClassifierConfig config_;
  at::Tensor pre_w_, pre_b_;  // (C, C), (C): pooled pre-classifier
  at::Tensor out_w_, out_b_;  // (K, C), (K): class logits
};

}  // namespace

void CheckClassifierConfig(const ClassifierConfig& c) {
  CONVEYOR_CHECK(c.vocab >= 1) << "vocab must be at least 1, got " << c.vocab;
  CONVEYOR_CHECK(c.hidden >= 1) << "hidden must be at least 1, got " << c.hidden;
  CONVEYOR_CHECK(c.heads >= 1 && c.hidden % c.heads == 0)
      << "hidden (" << c.hidden << ") must be a multiple of heads (" << c.heads << ")";
  CONVEYOR_CHECK(c.layers >= 1) << "layers must be at least 1, got " << c.layers;
  CONVEYOR_CHECK(c.max_seq_len >= 1) << "max_seq_len must be at least 1, got " << c.max_seq_len;
  CONVEYOR_CHECK(c.classes >= 2) << "classes must be at least 2, got " << c.classes;
  CheckTensorParallel(c.tp, c.heads);
  CONVEYOR_CHECK(!c.tp.splits_sequence())
      << "the classifier does not take sequence parallelism (its head pools whole sequences): "
         "drop --sequence-parallel";
}

LayerList BuildClassifier(const ClassifierConfig& config, uint64_t seed, int begin, int end) {
  CheckClassifierConfig(config);
  const int count = config.layers + 2;
  return BuildLayerRange(count, begin, end, [&](int l) -> std::shared_ptr<Layer> {
    if (l == 0) return std::make_shared<Embedding>(config, seed);
    if (l == count - 1) return std::make_shared<Head>(config, seed);
    return std::make_shared<Block>(config, seed, l - 1);
  });
}

int64_t CountCorrect(const at::Tensor& logits, const at::Tensor& targets) {
  CONVEYOR_CHECK(logits.dim() == 2 && targets.dim() == 1 && targets.size(0) == logits.size(0))
      << "CountCorrect wants logits (n, K) and targets (n,), got " << logits.sizes() << " and "
      << targets.sizes();
  return logits.argmax(-1).eq(targets).logical_and(targets.ge(0)).sum().item<int64_t>();
}

}  // namespace conveyor
