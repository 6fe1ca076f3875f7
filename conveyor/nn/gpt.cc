#include "conveyor/nn/gpt.h"

#include <ATen/ATen.h>

#include <cmath>
#include <string>

#include "conveyor/common/error.h"
#include "conveyor/nn/linear.h"
#include "conveyor/nn/transformer.h"

namespace conveyor {
namespace {

class Embedding : public Layer {
 public:
  Embedding(const GptConfig& c, uint64_t seed) : config_(c) {
    at::Generator gen = LayerGenerator(seed, 0);
    wte_ = NormalParam(gen, {c.vocab, c.hidden}, 0.02);
    wpe_ = NormalParam(gen, {c.max_seq_len, c.hidden}, 0.01);
  }

  // ids (n, T) -> (n, T, C)
  at::Tensor Forward(const at::Tensor& ids, const MicroBatch& mb) override {
    const int64_t t = ids.size(1);
    CONVEYOR_CHECK(t <= config_.max_seq_len)
        << "sequence length " << t << " exceeds the model's max_seq_len " << config_.max_seq_len;
    return at::embedding(wte_, ids) + wpe_.narrow(0, 0, t).unsqueeze(0);
  }

  NamedTensors NamedParameters() override { return {{"embed.wte", wte_}, {"embed.wpe", wpe_}}; }
  std::vector<int64_t> InputShape(const MicroBatch& mb) const override { return TokenShape(mb); }
  std::vector<int64_t> OutputShape(const MicroBatch& mb) const override {
    return HiddenShape(mb, config_.hidden);
  }

 private:
  GptConfig config_;
  at::Tensor wte_;  // (V, C) token embeddings
  at::Tensor wpe_;  // (max_seq_len, C) position embeddings
};

class Block : public Layer {
 public:
  Block(const GptConfig& c, uint64_t seed, int block)
      : config_(c), prefix_("blocks." + std::to_string(block) + ".") {
    at::Generator gen = LayerGenerator(seed, block + 1);
    const int64_t h = c.hidden;
    const double proj_std = 0.02 / std::sqrt(2.0 * c.layers);
    ln1_w_ = OnesParam({h});
    ln1_b_ = ZerosParam({h});
    qkv_w_ = NormalParam(gen, {3 * h, h}, 0.02);
    qkv_b_ = ZerosParam({3 * h});
    proj_w_ = NormalParam(gen, {h, h}, proj_std);
    proj_b_ = ZerosParam({h});
    ln2_w_ = OnesParam({h});
    ln2_b_ = ZerosParam({h});
    fc_w_ = NormalParam(gen, {4 * h, h}, 0.02);
    fc_b_ = ZerosParam({4 * h});
    fc2_w_ = NormalParam(gen, {h, 4 * h}, proj_std);
    fc2_b_ = ZerosParam({h});
  }

  // x (n, T, C) -> (n, T, C): pre-norm causal self-attention and MLP, both residual.
  at::Tensor Forward(const at::Tensor& x, const MicroBatch& mb) override {
    const int64_t c = x.size(2);
    at::Tensor h = at::layer_norm(x, {c}, ln1_w_, ln1_b_);
    const at::Tensor out =
        x + SelfAttention(h, {qkv_w_, qkv_b_, proj_w_, proj_b_}, config_.heads,
                          /*causal=*/true, mb.attention_mask, config_.recompute_attention);
    return out + Mlp(at::layer_norm(out, {c}, ln2_w_, ln2_b_), fc_w_, fc_b_, fc2_w_, fc2_b_);
  }

  NamedTensors NamedParameters() override {
    return {{prefix_ + "ln1.weight", ln1_w_},        {prefix_ + "ln1.bias", ln1_b_},
            {prefix_ + "attn.qkv.weight", qkv_w_},   {prefix_ + "attn.qkv.bias", qkv_b_},
            {prefix_ + "attn.proj.weight", proj_w_}, {prefix_ + "attn.proj.bias", proj_b_},
            {prefix_ + "ln2.weight", ln2_w_},        {prefix_ + "ln2.bias", ln2_b_},
            {prefix_ + "mlp.fc.weight", fc_w_},      {prefix_ + "mlp.fc.bias", fc_b_},
            {prefix_ + "mlp.proj.weight", fc2_w_},   {prefix_ + "mlp.proj.bias", fc2_b_}};
  }
  std::vector<int64_t> InputShape(const MicroBatch& mb) const override {
    return HiddenShape(mb, config_.hidden);
  }
  std::vector<int64_t> OutputShape(const MicroBatch& mb) const override {
    return HiddenShape(mb, config_.hidden);
  }

 private:
  GptConfig config_;
  std::string prefix_;
  at::Tensor ln1_w_, ln1_b_;    // (C), (C): layer norm before attention
  at::Tensor qkv_w_, qkv_b_;    // (3C, C), (3C): queries, keys, values stacked
  at::Tensor proj_w_, proj_b_;  // (C, C), (C): attention output projection
  at::Tensor ln2_w_, ln2_b_;    // (C), (C): layer norm before the MLP
  at::Tensor fc_w_, fc_b_;      // (4C, C), (4C): MLP up-projection
  at::Tensor fc2_w_, fc2_b_;    // (C, 4C), (C): MLP down-projection
};

class Head : public Layer {
 public:
  Head(const GptConfig& c, uint64_t seed) : config_(c) {
    lnf_w_ = OnesParam({c.hidden});
    lnf_b_ = ZerosParam({c.hidden});
    if (c.tie_embeddings) {
      // The same initial values as the embedding's copy (drawn first from layer 0's stream).
      at::Generator gen = LayerGenerator(seed, 0);
      lm_head_ = NormalParam(gen, {c.vocab, c.hidden}, 0.02);
    } else {
      at::Generator gen = LayerGenerator(seed, c.layers + 1);
      lm_head_ = NormalParam(gen, {c.vocab, c.hidden}, 0.02);
    }
  }

  // x (n, T, C) -> logits (n, T, V)
  at::Tensor Forward(const at::Tensor& x, const MicroBatch& mb) override {
    at::Tensor h = at::layer_norm(x, {config_.hidden}, lnf_w_, lnf_b_);
    return Linear(h, lm_head_, at::Tensor());
  }

  bool has_loss() const override { return true; }

  at::Tensor LossSum(const at::Tensor& logits, const MicroBatch& mb) override {
    return at::cross_entropy_loss(logits.reshape({-1, config_.vocab}), mb.targets.reshape({-1}),
                                  /*weight=*/{}, at::Reduction::Sum, /*ignore_index=*/-1);
  }

  NamedTensors NamedParameters() override {
    return {{"head.ln.weight", lnf_w_},
            {"head.ln.bias", lnf_b_},
            {config_.tie_embeddings ? "embed.wte" : "head.lm.weight", lm_head_}};
  }
  std::vector<int64_t> InputShape(const MicroBatch& mb) const override {
    return HiddenShape(mb, config_.hidden);
  }
  std::vector<int64_t> OutputShape(const MicroBatch& mb) const override {
    return {mb.size(), mb.seq_len(), config_.vocab};
  }

 private:
  GptConfig config_;
  at::Tensor lnf_w_, lnf_b_;  // (C), (C): final layer norm
  at::Tensor lm_head_;        // (V, C): logits; the embedding's wte when tied
};

}  // namespace

void CheckGptConfig(const GptConfig& c) {
  CONVEYOR_CHECK(c.vocab >= 2) << "vocab must be at least 2, got " << c.vocab;
  CONVEYOR_CHECK(c.hidden >= 1) << "hidden must be at least 1, got " << c.hidden;
  CONVEYOR_CHECK(c.heads >= 1 && c.hidden % c.heads == 0)
      << "hidden (" << c.hidden << ") must be a multiple of heads (" << c.heads << ")";
  CONVEYOR_CHECK(c.layers >= 1) << "layers must be at least 1, got " << c.layers;
  CONVEYOR_CHECK(c.max_seq_len >= 1) << "max_seq_len must be at least 1, got " << c.max_seq_len;
}

LayerList BuildGpt(const GptConfig& config, uint64_t seed) {
  CheckGptConfig(config);
  LayerList layers;
  layers.push_back(std::make_shared<Embedding>(config, seed));
  for (int b = 0; b < config.layers; ++b)
    layers.push_back(std::make_shared<Block>(config, seed, b));
  layers.push_back(std::make_shared<Head>(config, seed));
  return layers;
}

}  // namespace conveyor
