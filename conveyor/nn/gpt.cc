#include "conveyor/nn/gpt.h"

#include <ATen/ATen.h>

#include <cmath>
#include <string>

#include "conveyor/common/error.h"
#include "conveyor/nn/kv_cache.h"
#include "conveyor/nn/linear.h"
#include "conveyor/nn/transformer.h"
#include "conveyor/nn/vocab_parallel.h"

namespace conveyor {
namespace {

constexpr char kTokenEmbedding[] = "embed.wte";
// GPT-2's initialisation: weights N(0, 0.02), position embeddings N(0, 0.01), and the
// projections into the residual stream scaled down by sqrt(2 x layers) (Radford et al., 2019).
constexpr double kInitStd = 0.02;
constexpr double kPositionInitStd = 0.01;
constexpr char kLmHead[] = "head.lm.weight";

// The token embedding's layout, the same in the embedding and, tied, in the head.
ParameterSpec TokenEmbeddingSpec() { return VocabParallel().StoredAs("wte.weight"); }

// The parameter `name` of full shape `shape`, laid out as `spec` (declared in `specs`): drawn
// N(0, std) from gen, this rank's part kept; or (c.weights otherwise) this rank's part
// allocated undrawn.
at::Tensor Drawn(const GptConfig& c, at::Generator& gen, const std::string& name,
                 const ParameterSpec& spec, std::vector<int64_t> shape, double std,
                 ParameterSpecs& specs) {
  if (c.weights != WeightInit::kDrawn) {
    return UndrawnParam(name, spec, std::move(shape), c.tp, specs, c.weights);
  }
  return ShardParam(name, spec, NormalParam(gen, shape, std), c.tp, specs);
}

// The replicated parameter `name`, `value`, declared in `specs` as stored in a GPT-2 folder as
// `hf`. Every replicated parameter of a GPT is used outside the TP regions: under sequence
// parallelism on this rank's positions only.
at::Tensor Replicated(const GptConfig& c, const std::string& name, const std::string& hf,
                      at::Tensor value, ParameterSpecs& specs) {
  specs.Declare(name, ReplicatedSpec(c.tp.splits_sequence()).StoredAs(hf));
  return value;
}

class Embedding : public Layer {
 public:
  Embedding(const GptConfig& c, uint64_t seed) : config_(c) {
    at::Generator gen = LayerInitGenerator(seed, 0);
    wte_ =
        Drawn(c, gen, kTokenEmbedding, TokenEmbeddingSpec(), {c.vocab, c.hidden}, kInitStd, specs_);
    wpe_ = Drawn(c, gen, "embed.wpe", ReplicatedSpec(c.tp.splits_sequence()).StoredAs("wpe.weight"),
                 {c.max_seq_len, c.hidden}, kPositionInitStd, specs_);
  }

  // ids (n, T) of the positions [p, p + T) (p = 0 but when generating with a cache) ->
  // (n, T, C), or this rank's positions (n, T/tp, C) under sequence parallelism
  at::Tensor Forward(const at::Tensor& ids, const MicroBatch& mb) override {
    const int64_t t = ids.size(1), p = KvCache::FirstPosition(mb);
    CONVEYOR_CHECK(p + t <= config_.max_seq_len)
        << "sequence length " << p + t << " exceeds the model's max_seq_len "
        << config_.max_seq_len;
    const TensorParallel& tp = config_.tp;
    CheckSequenceSplits(t, tp);
    const int64_t first = tp.first_position(t), local = tp.local_positions(t);
    // Packed documents (mb.positions): each token at its position in its document.
    const at::Tensor positions =
        mb.positions.defined()
            ? wpe_.index_select(0, mb.positions.narrow(1, first, local).reshape(-1))
                  .view({ids.size(0), local, config_.hidden})
            : wpe_.narrow(0, p + first, local).unsqueeze(0);
    return VocabParallelEmbedding(ids, wte_, tp, config_.vocab) + positions;
  }

  NamedTensors NamedParameters() override { return {{kTokenEmbedding, wte_}, {"embed.wpe", wpe_}}; }
  std::vector<int64_t> InputShape(const MicroBatch& mb) const override { return TokenShape(mb); }
  std::vector<int64_t> OutputShape(const MicroBatch& mb) const override {
    return HiddenShape(mb, config_.hidden, config_.tp);
  }

 private:
  GptConfig config_;
  at::Tensor wte_;  // (r, C) token embeddings: this rank's vocabulary rows
  at::Tensor wpe_;  // (max_seq_len, C) position embeddings, replicated
};

class Block : public Layer {
 public:
  Block(const GptConfig& c, uint64_t seed, int block)
      : config_(c), prefix_("blocks." + std::to_string(block) + ".") {
    at::Generator gen = LayerInitGenerator(seed, block + 1);
    const int64_t h = c.hidden;
    const double proj_std = kInitStd / std::sqrt(2.0 * c.layers);
    // GPT-2's names, "h.<block>.<name>"; its Conv1D weights are stored (in, out).
    const std::string hf = "h." + std::to_string(block) + ".";
    auto conv1d = [&](const ParameterSpec& spec, const char* name) {
      return spec.StoredAs(hf + name, /*transposed=*/true);
    };
    auto stored = [&](const ParameterSpec& spec, const char* name) {
      return spec.StoredAs(hf + name);
    };
    auto normal = [&](const char* name, const ParameterSpec& spec, std::vector<int64_t> shape,
                      double std) {
      return Drawn(c, gen, prefix_ + name, spec, std::move(shape), std, specs_);
    };
    auto shard = [&](const char* name, const ParameterSpec& spec, const at::Tensor& full) {
      return ShardParam(prefix_ + name, spec, full, c.tp, specs_);
    };
    auto replicated = [&](const char* name, const char* hf_name, const at::Tensor& value) {
      return Replicated(c, prefix_ + name, hf + hf_name, value, specs_);
    };
    ln1_w_ = replicated("ln1.weight", "ln_1.weight", OnesParam({h}));
    ln1_b_ = replicated("ln1.bias", "ln_1.bias", ZerosParam({h}));
    qkv_w_ = normal("attn.qkv.weight", conv1d(FusedColumnParallel(3), "attn.c_attn.weight"),
                    {3 * h, h}, kInitStd);
    qkv_b_ = shard("attn.qkv.bias", stored(FusedColumnParallel(3), "attn.c_attn.bias"),
                   ZerosParam({3 * h}));
    proj_w_ =
        normal("attn.proj.weight", conv1d(RowParallel(), "attn.c_proj.weight"), {h, h}, proj_std);
    proj_b_ = replicated("attn.proj.bias", "attn.c_proj.bias", ZerosParam({h}));
    ln2_w_ = replicated("ln2.weight", "ln_2.weight", OnesParam({h}));
    ln2_b_ = replicated("ln2.bias", "ln_2.bias", ZerosParam({h}));
    fc_w_ =
        normal("mlp.fc.weight", conv1d(ColumnParallel(), "mlp.c_fc.weight"), {4 * h, h}, kInitStd);
    fc_b_ = shard("mlp.fc.bias", stored(ColumnParallel(), "mlp.c_fc.bias"), ZerosParam({4 * h}));
    fc2_w_ =
        normal("mlp.proj.weight", conv1d(RowParallel(), "mlp.c_proj.weight"), {h, 4 * h}, proj_std);
    fc2_b_ = replicated("mlp.proj.bias", "mlp.c_proj.bias", ZerosParam({h}));
  }

  // x (n, T, C) -> (n, T, C): pre-norm causal self-attention and MLP, both residual (T/tp
  // positions in and out under sequence parallelism).
  at::Tensor Forward(const at::Tensor& x, const MicroBatch& mb) override {
    const int64_t c = x.size(2);
    at::Tensor h = at::layer_norm(x, {c}, ln1_w_, ln1_b_);
    // No key mask: a row is a whole window or, at the end of the held-out text, padding whose
    // targets are not counted; causal attention needs nothing more, and takes the fused
    // kernel where libtorch has one.
    const at::Tensor out = x + SelfAttention(h, {qkv_w_, qkv_b_, proj_w_, proj_b_}, config_.heads,
                                             /*causal=*/true, at::Tensor(),
                                             config_.recompute_attention, config_.tp, &cache_, mb);
    return out + Mlp(at::layer_norm(out, {c}, ln2_w_, ln2_b_), fc_w_, fc_b_, fc2_w_, fc2_b_,
                     config_.tp, config_.gelu_tanh);
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
    return HiddenShape(mb, config_.hidden, config_.tp);
  }
  std::vector<int64_t> OutputShape(const MicroBatch& mb) const override {
    return HiddenShape(mb, config_.hidden, config_.tp);
  }

 private:
  GptConfig config_;
  std::string prefix_;
  // p = config_.tp.size: split parameters hold this rank's part, the others are replicated.
  at::Tensor ln1_w_, ln1_b_;    // (C), (C): layer norm before attention
  at::Tensor qkv_w_, qkv_b_;    // (3C/p, C), (3C/p): this rank's heads' q, k, v stacked
  at::Tensor proj_w_, proj_b_;  // (C, C/p), (C): attention output projection
  at::Tensor ln2_w_, ln2_b_;    // (C), (C): layer norm before the MLP
  at::Tensor fc_w_, fc_b_;      // (4C/p, C), (4C/p): MLP up-projection
  at::Tensor fc2_w_, fc2_b_;    // (C, 4C/p), (C): MLP down-projection
  KvCache cache_;               // keys and values while generating
};

class Head : public Layer {
 public:
  Head(const GptConfig& c, uint64_t seed) : config_(c) {
    lnf_w_ = Replicated(c, "head.ln.weight", "ln_f.weight", OnesParam({c.hidden}), specs_);
    lnf_b_ = Replicated(c, "head.ln.bias", "ln_f.bias", ZerosParam({c.hidden}), specs_);
    // Tied: the same initial values as the embedding's copy (drawn first from layer 0's
    // stream), under the same name, so the same row shard.
    at::Generator gen = LayerInitGenerator(seed, c.tie_embeddings ? 0 : c.layers + 1);
    // Untied, GPT2LMHeadModel holds it outside its "transformer." module.
    const ParameterSpec spec =
        c.tie_embeddings ? TokenEmbeddingSpec() : VocabParallel().StoredAs("lm_head.weight");
    lm_head_ = Drawn(c, gen, lm_head_name(), spec, {c.vocab, c.hidden}, kInitStd, specs_);
  }

  // x (n, T, C), or (n, T/tp, C) under sequence parallelism -> logits (n, T, r) of this rank's
  // r vocabulary rows (vocab_parallel.h)
  at::Tensor Forward(const at::Tensor& x, const MicroBatch& mb) override {
    at::Tensor h = at::layer_norm(x, {config_.hidden}, lnf_w_, lnf_b_);
    return ColumnParallelLinears(h, {{lm_head_, at::Tensor()}}, config_.tp)[0];
  }

  bool has_loss() const override { return true; }

  at::Tensor LossSum(const at::Tensor& logits, const MicroBatch& mb) override {
    return VocabParallelCrossEntropySum(logits.reshape({-1, logits.size(-1)}),
                                        mb.targets.reshape({-1}), config_.tp, config_.vocab);
  }

  NamedTensors NamedParameters() override {
    return {{"head.ln.weight", lnf_w_}, {"head.ln.bias", lnf_b_}, {lm_head_name(), lm_head_}};
  }
  std::vector<int64_t> InputShape(const MicroBatch& mb) const override {
    return HiddenShape(mb, config_.hidden, config_.tp);
  }
  std::vector<int64_t> OutputShape(const MicroBatch& mb) const override {
    return {mb.size(), mb.seq_len(), VocabularyRowsPerRank(config_.vocab, config_.tp.size)};
  }

 private:
  const char* lm_head_name() const { return config_.tie_embeddings ? kTokenEmbedding : kLmHead; }

  GptConfig config_;
  at::Tensor lnf_w_, lnf_b_;  // (C), (C): final layer norm, replicated
  at::Tensor lm_head_;        // (r, C): this rank's vocabulary rows; the embedding's wte when tied
};

}  // namespace

void CheckGptConfig(const GptConfig& c) {
  CONVEYOR_CHECK(c.vocab >= 2) << "vocab must be at least 2, got " << c.vocab;
  CONVEYOR_CHECK(c.hidden >= 1) << "hidden must be at least 1, got " << c.hidden;
  CONVEYOR_CHECK(c.heads >= 1 && c.hidden % c.heads == 0)
      << "hidden (" << c.hidden << ") must be a multiple of heads (" << c.heads << ")";
  CONVEYOR_CHECK(c.layers >= 1) << "layers must be at least 1, got " << c.layers;
  CONVEYOR_CHECK(c.max_seq_len >= 1) << "max_seq_len must be at least 1, got " << c.max_seq_len;
  CheckTensorParallel(c.tp, c.heads);
  CheckVocabularySplit(c.vocab, c.tp.size);
}

std::vector<ParameterShapes> GptLayerShapes(const GptConfig& c) {
  const int64_t h = c.hidden;
  std::vector<ParameterShapes> layers;
  layers.push_back({{kTokenEmbedding, {c.vocab, h}}, {"embed.wpe", {c.max_seq_len, h}}});
  for (int i = 0; i < c.layers; ++i) {
    const std::string p = "blocks." + std::to_string(i) + ".";
    layers.push_back({{p + "ln1.weight", {h}},
                      {p + "ln1.bias", {h}},
                      {p + "attn.qkv.weight", {3 * h, h}},
                      {p + "attn.qkv.bias", {3 * h}},
                      {p + "attn.proj.weight", {h, h}},
                      {p + "attn.proj.bias", {h}},
                      {p + "ln2.weight", {h}},
                      {p + "ln2.bias", {h}},
                      {p + "mlp.fc.weight", {4 * h, h}},
                      {p + "mlp.fc.bias", {4 * h}},
                      {p + "mlp.proj.weight", {h, 4 * h}},
                      {p + "mlp.proj.bias", {h}}});
  }
  layers.push_back({{"head.ln.weight", {h}},
                    {"head.ln.bias", {h}},
                    {c.tie_embeddings ? kTokenEmbedding : kLmHead, {c.vocab, h}}});
  return layers;
}

LayerList BuildGpt(const GptConfig& config, uint64_t seed, int begin, int end) {
  CheckGptConfig(config);
  const int count = config.layers + 2;
  return BuildLayerRange(count, begin, end, [&](int l) -> std::shared_ptr<Layer> {
    if (l == 0) return std::make_shared<Embedding>(config, seed);
    if (l == count - 1) return std::make_shared<Head>(config, seed);
    return std::make_shared<Block>(config, seed, l - 1);
  });
}

}  // namespace conveyor
