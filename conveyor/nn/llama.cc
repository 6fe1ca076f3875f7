#include "conveyor/nn/llama.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <memory>
#include <string>
#include <tuple>

#include "conveyor/common/error.h"
#include "conveyor/nn/kv_cache.h"
#include "conveyor/nn/linear.h"
#include "conveyor/nn/transformer.h"
#include "conveyor/nn/vocab_parallel.h"

namespace conveyor {
namespace {

constexpr double kInitStd = 0.02;  // Hugging Face's LlamaConfig.initializer_range
constexpr char kEmbedding[] = "model.embed_tokens.weight";
constexpr char kLmHead[] = "lm_head.weight";

// The parameter `name` of full shape `shape` in a model built for c.tp, laid out as `spec`
// (declared in `specs`): drawn N(0, std) from its own stream, or (c.weights otherwise) this
// rank's shard allocated undrawn.
at::Tensor NormalTensor(const std::string& name, const ParameterSpec& spec,
                        std::vector<int64_t> shape, uint64_t seed, const LlamaConfig& c,
                        ParameterSpecs& specs) {
  if (c.weights != WeightInit::kDrawn) {
    return UndrawnParam(name, spec, std::move(shape), c.tp, specs, c.weights);
  }
  at::Generator gen = TensorInitGenerator(seed, name);
  return ShardParam(name, spec, NormalParam(gen, shape, kInitStd), c.tp, specs);
}

// The MoE block of a sparse layer of `c`.
MoeConfig BlockOf(const LlamaConfig& c) {
  MoeConfig block = c.moe->block;
  block.hidden = c.hidden;
  block.weights = c.weights;
  return block;
}

// Where a LoRA target's projection is in a decoder layer and how tensor parallelism lays
// out its weight.
struct LoraTarget {
  std::string module;  // "self_attn." or "mlp."
  ParameterSpec spec;
  bool row_parallel = false;
};

LoraTarget LoraTargetOf(const std::string& target, const LlamaConfig& c) {
  if (target == "q_proj") return {"self_attn.", ColumnParallel()};
  if (target == "k_proj" || target == "v_proj") {
    return {"self_attn.", KeyValueParallel(c.tp.kv_replicas)};
  }
  if (target == "o_proj") return {"self_attn.", RowParallel(), true};
  if (target == "down_proj") return {"mlp.", RowParallel(), true};
  CONVEYOR_ASSERT(target == "gate_proj" || target == "up_proj") << "LoRA target " << target;
  return {"mlp.", ColumnParallel()};
}

// The parameters of decoder layer i (global layer index i + 1), full shapes.
ParameterShapes DecoderShapes(const LlamaConfig& c, int i) {
  const int64_t h = c.hidden, d = c.hidden / c.heads;
  const std::string p = "model.layers." + std::to_string(i) + ".";
  ParameterShapes shapes = {{p + "input_layernorm.weight", {h}},
                            {p + "self_attn.q_proj.weight", {c.heads * d, h}},
                            {p + "self_attn.k_proj.weight", {c.kv_heads * d, h}},
                            {p + "self_attn.v_proj.weight", {c.kv_heads * d, h}},
                            {p + "self_attn.o_proj.weight", {h, c.heads * d}},
                            {p + "post_attention_layernorm.weight", {h}}};
  if (c.qkv_bias) {
    shapes[p + "self_attn.q_proj.bias"] = {c.heads * d};
    shapes[p + "self_attn.k_proj.bias"] = {c.kv_heads * d};
    shapes[p + "self_attn.v_proj.bias"] = {c.kv_heads * d};
  }
  if (c.qk_norm != QkNorm::kNone) {
    const bool head = c.qk_norm == QkNorm::kHead;
    shapes[p + "self_attn.q_norm.weight"] = {head ? d : c.heads * d};
    shapes[p + "self_attn.k_norm.weight"] = {head ? d : c.kv_heads * d};
  }
  if (IsSparseLayer(c, i)) {
    for (auto& [name, shape] : MoeParameterShapes(BlockOf(c), p + c.moe->prefix)) {
      shapes[name] = shape;
    }
  } else {
    shapes[p + "mlp.gate_proj.weight"] = {c.intermediate, h};
    shapes[p + "mlp.up_proj.weight"] = {c.intermediate, h};
    shapes[p + "mlp.down_proj.weight"] = {h, c.intermediate};
  }
  if (c.lora) {
    const int64_t r = c.lora->rank;
    for (const std::string& target : c.lora->targets) {
      const auto base = shapes.find(p + LoraTargetOf(target, c).module + target + ".weight");
      if (base == shapes.end()) continue;  // refused by CheckLlamaLora
      const std::vector<int64_t> out_in = base->second;
      shapes[LoraAName(base->first)] = {r, out_in[1]};
      shapes[LoraBName(base->first)] = {out_in[0], r};
    }
  }
  return shapes;
}

// A LoRA config's checks (CheckLlamaConfig).
void CheckLlamaLora(const LlamaConfig& c) {
  const LoraConfig& lora = *c.lora;
  CONVEYOR_CHECK(!c.moe) << "LoRA adapters (--lora-rank " << lora.rank
                         << ") are for dense llamas: this one has Mixture-of-Experts layers";
  CONVEYOR_CHECK(lora.rank >= 1) << "--lora-rank must be at least 1, got " << lora.rank;
  CONVEYOR_CHECK(!lora.targets.empty()) << "--lora-targets names no projection";
  const ParameterShapes shapes = DecoderShapes(c, 0);
  for (const std::string& target : lora.targets) {
    const std::string name =
        "model.layers.0." + LoraTargetOf(target, c).module + target + ".weight";
    const auto it = shapes.find(name);
    CONVEYOR_CHECK(it != shapes.end())
        << "--lora-targets names '" << target << "', which names no layer of this llama";
    const int64_t out = it->second[0], in = it->second[1], width = std::min(in, out);
    CONVEYOR_CHECK(lora.rank <= width)
        << "--lora-rank " << lora.rank << " exceeds the width of " << target << " (" << out << " x "
        << in << ": at most " << width << ")";
    CONVEYOR_CHECK(c.tp.kv_replicas == 1 || (target != "k_proj" && target != "v_proj"))
        << "--lora-targets " << target << " under --tp " << c.tp.size << ": each of the "
        << c.kv_heads << " key-value heads is replicated over " << c.tp.kv_replicas
        << " ranks, which LoRA adapters do not take yet; adapt q_proj and o_proj only";
  }
}

class LlamaEmbedding : public Layer {
 public:
  LlamaEmbedding(const LlamaConfig& c, uint64_t seed)
      : config_(c),
        weight_(NormalTensor(kEmbedding, VocabParallel(), {c.vocab, c.hidden}, seed, c, specs_)) {}

  // ids (n, T) of the positions [p, p + T) (p = 0 but when generating with a cache) ->
  // (n, T, C)
  at::Tensor Forward(const at::Tensor& ids, const MicroBatch& mb) override {
    const int64_t end = KvCache::FirstPosition(mb) + ids.size(1);
    CONVEYOR_CHECK(end <= config_.max_seq_len)
        << "sequence length " << end << " exceeds the model's max_seq_len " << config_.max_seq_len;
    CheckContextSplits(ids.size(1), config_.cp);
    const at::Tensor mine = ContextShareOf(ids, config_.cp);  // (n, T/N)
    CheckSequenceSplits(mine.size(1), config_.tp);
    return VocabParallelEmbedding(mine, weight_, config_.tp, config_.vocab);
  }

  NamedTensors NamedParameters() override { return {{kEmbedding, weight_}}; }
  std::vector<int64_t> InputShape(const MicroBatch& mb) const override { return TokenShape(mb); }
  std::vector<int64_t> OutputShape(const MicroBatch& mb) const override {
    return HiddenShape(mb, config_.hidden, config_.tp, config_.cp);
  }

 private:
  LlamaConfig config_;
  at::Tensor weight_;  // (r, C): this rank's vocabulary rows
};

class LlamaDecoderLayer : public Layer {
 public:
  LlamaDecoderLayer(const LlamaConfig& c, uint64_t seed, int index)
      : config_(c), prefix_("model.layers." + std::to_string(index) + ".") {
    const ParameterShapes shapes = DecoderShapes(c, index);
    auto normal = [&](const char* name, const ParameterSpec& spec) {
      return NormalTensor(prefix_ + name, spec, shapes.at(prefix_ + name), seed, c, specs_);
    };
    // The norms outside the TP regions: under sequence parallelism on this rank's positions.
    const ParameterSpec norm_spec = ReplicatedSpec(c.tp.splits_sequence());
    input_norm_ = OnesParam({c.hidden});
    specs_.Declare(prefix_ + "input_layernorm.weight", norm_spec);
    q_ = normal("self_attn.q_proj.weight", ColumnParallel());
    k_ = normal("self_attn.k_proj.weight", KeyValueParallel(c.tp.kv_replicas));
    v_ = normal("self_attn.v_proj.weight", KeyValueParallel(c.tp.kv_replicas));
    o_ = normal("self_attn.o_proj.weight", RowParallel());
    if (c.qkv_bias) {  // zeros, laid out as their weights
      auto bias = [&](const char* name, const ParameterSpec& spec) {
        return ShardParam(prefix_ + name, spec, ZerosParam(shapes.at(prefix_ + name)), c.tp,
                          specs_);
      };
      q_bias_ = bias("self_attn.q_proj.bias", ColumnParallel());
      k_bias_ = bias("self_attn.k_proj.bias", KeyValueParallel(c.tp.kv_replicas));
      v_bias_ = bias("self_attn.v_proj.bias", KeyValueParallel(c.tp.kv_replicas));
    }
    if (c.qk_norm != QkNorm::kNone) {
      // Each head's (Qwen3's) applies to this rank's heads only (the whole projection's
      // (OLMoE's) is refused under tp).
      for (const char* name : {"self_attn.q_norm.weight", "self_attn.k_norm.weight"}) {
        specs_.Declare(prefix_ + name, ReplicatedSpec(c.tp.size > 1));
      }
      q_norm_ = OnesParam(shapes.at(prefix_ + "self_attn.q_norm.weight"));
      k_norm_ = OnesParam(shapes.at(prefix_ + "self_attn.k_norm.weight"));
    }
    mlp_norm_ = OnesParam({c.hidden});
    specs_.Declare(prefix_ + "post_attention_layernorm.weight", norm_spec);
    if (IsSparseLayer(c, index)) {
      moe_ =
          std::make_unique<MoeMlp>(BlockOf(c), prefix_ + c.moe->prefix, seed, specs_, c.ep, c.tp);
    } else {
      gate_ = normal("mlp.gate_proj.weight", ColumnParallel());
      up_ = normal("mlp.up_proj.weight", ColumnParallel());
      down_ = normal("mlp.down_proj.weight", RowParallel());
    }
    if (c.lora) {
      for (const std::string& target : c.lora->targets) {
        const LoraTarget where = LoraTargetOf(target, c);
        const std::string name = prefix_ + where.module + target + ".weight";
        const std::vector<int64_t>& shape = shapes.at(name);
        lora_.emplace(target, LoraAdapter(name, shape[0], shape[1], where.row_parallel, where.spec,
                                          *c.lora, seed, c.tp, specs_, c.weights));
      }
    }
  }

  // x (n, T, C) -> (n, T, C): pre-norm attention and MLP, both residual.
  at::Tensor Forward(const at::Tensor& x, const MicroBatch& mb) override {
    const at::Tensor out = x + Attention(RmsNorm(x, input_norm_, config_.rms_norm_eps), mb);
    if (moe_ != nullptr) return out + moe_->Forward(RmsNorm(out, mlp_norm_, config_.rms_norm_eps));
    const std::vector<at::Tensor> gate_up = LoraColumnParallelLinears(
        RmsNorm(out, mlp_norm_, config_.rms_norm_eps), {{gate_, {}}, {up_, {}}},
        {adapter("gate_proj"), adapter("up_proj")}, config_.tp);
    const at::Tensor units = at::silu(gate_up[0]) * gate_up[1];  // (n, T, F/p)
    return out + LoraRowParallelLinear(units, down_, *adapter("down_proj"), config_.tp);
  }

  NamedTensors NamedParameters() override {
    NamedTensors named = {{prefix_ + "input_layernorm.weight", input_norm_},
                          {prefix_ + "self_attn.q_proj.weight", q_},
                          {prefix_ + "self_attn.k_proj.weight", k_},
                          {prefix_ + "self_attn.v_proj.weight", v_},
                          {prefix_ + "self_attn.o_proj.weight", o_}};
    if (q_bias_.defined()) {
      named.push_back({prefix_ + "self_attn.q_proj.bias", q_bias_});
      named.push_back({prefix_ + "self_attn.k_proj.bias", k_bias_});
      named.push_back({prefix_ + "self_attn.v_proj.bias", v_bias_});
    }
    if (q_norm_.defined()) {
      named.push_back({prefix_ + "self_attn.q_norm.weight", q_norm_});
      named.push_back({prefix_ + "self_attn.k_norm.weight", k_norm_});
    }
    named.push_back({prefix_ + "post_attention_layernorm.weight", mlp_norm_});
    if (moe_ != nullptr) {
      const NamedTensors& block = moe_->NamedParameters();
      named.insert(named.end(), block.begin(), block.end());
    } else {
      named.push_back({prefix_ + "mlp.gate_proj.weight", gate_});
      named.push_back({prefix_ + "mlp.up_proj.weight", up_});
      named.push_back({prefix_ + "mlp.down_proj.weight", down_});
    }
    for (const auto& [target, lora] : lora_) {
      for (auto& pair : lora.NamedParameters()) named.push_back(std::move(pair));
    }
    return named;
  }
  std::vector<int64_t> InputShape(const MicroBatch& mb) const override {
    return HiddenShape(mb, config_.hidden, config_.tp, config_.cp);
  }
  std::vector<int64_t> OutputShape(const MicroBatch& mb) const override {
    return HiddenShape(mb, config_.hidden, config_.tp, config_.cp);
  }
  MoeMlp* expert_block() override { return moe_.get(); }

 private:
  // h (n, T, C), normalised (this rank's positions (n, T/p, C) under sequence parallelism) ->
  // (n, T, C) (the same positions as h): causal grouped-query attention of this rank's heads,
  // the output projection summed over the TP group; through the cache when mb generates with
  // one.
  at::Tensor Attention(const at::Tensor& h, const MicroBatch& mb) {
    const TensorParallel& tp = config_.tp;
    // The key-value projections' input gradients count once over their heads' replicas.
    const double kv_scale = 1.0 / tp.kv_replicas;
    const std::vector<at::Tensor> qkv = LoraColumnParallelLinears(
        h, {{q_, q_bias_}, {k_, k_bias_, kv_scale}, {v_, v_bias_, kv_scale}},
        {adapter("q_proj"), adapter("k_proj"), adapter("v_proj")}, tp);
    const int64_t n = qkv[0].size(0), t = qkv[0].size(1), d = config_.hidden / config_.heads;
    const int64_t heads = config_.heads / tp.size;
    // This rank's key-value heads: KV / p, or one shared with the replicas' ranks.
    const int64_t kv_heads = k_.size(0) / d;
    // (n, T, count d) -> (n, count, T, d)
    auto heads_of = [&](const at::Tensor& y, int64_t count) {
      return y.view({n, t, count, d}).transpose(1, 2);
    };
    // Queries and keys normalised before the rotation: OLMoE the whole projection's, (n, T,
    // count d), Qwen3 each head's, (n, count, T, d).
    const auto normed = [&](const at::Tensor& y, const at::Tensor& w, int64_t count) {
      if (config_.qk_norm == QkNorm::kProjection) {
        return heads_of(RmsNorm(y, w, config_.rms_norm_eps), count);
      }
      const at::Tensor h = heads_of(y, count);
      return config_.qk_norm == QkNorm::kHead ? RmsNorm(h, w, config_.rms_norm_eps) : h;
    };
    // The true positions of this rank's tokens: from the cache's first on while generating,
    // the rank's share of the sequence under context parallelism.
    const ContextParallel& cp = config_.cp;
    const int64_t first = KvCache::FirstPosition(mb);
    // Packed documents (mb.positions): each token rotated by its position in its document.
    const at::Tensor positions =
        mb.positions.defined()
            ? ContextShareOf(mb.positions, cp)
            : (cp.size > 1 ? cp.Positions(t * cp.size, h.device())
                           : at::arange(first, first + t, h.options().dtype(at::kLong)));
    const at::Tensor documents =
        mb.positions.defined() ? DocumentIds(mb.positions) : at::Tensor();  // (n, T)
    const at::Tensor q =
        RotaryEmbedding(normed(qkv[0], q_norm_, heads), config_.rope_theta, positions);
    // (n, T, KV d / p) each
    at::Tensor k = RotaryEmbedding(normed(SumOverKvReplicas(qkv[1], tp), k_norm_, kv_heads),
                                   config_.rope_theta, positions);
    at::Tensor v = heads_of(SumOverKvReplicas(qkv[2], tp), kv_heads);
    std::tie(k, v) = cache_.Extend(mb, k, v);  // (n, KV/p, p + T, d) with a cache
    // The ring carries the key-value heads as they are (KV / H of the bytes of every head's).
    if (kv_heads != heads && cp.size == 1) {  // each serves heads / kv_heads query heads
      k = k.repeat_interleave(heads / kv_heads, 1);
      v = v.repeat_interleave(heads / kv_heads, 1);
    }
    const at::Tensor y =  // (n, T, H d/p)
        (cp.size > 1 ? RingAttention(q, k, v, cp, documents)
                     : AttentionHeads(q, k, v, KvCache::Causal(mb), at::Tensor(),
                                      config_.recompute_attention, documents))
            .transpose(1, 2)
            .reshape({n, t, heads * d});
    return LoraRowParallelLinear(y, o_, *adapter("o_proj"), tp);
  }

  // The adapter of projection `target` ("q_proj"), or an undefined one.
  const LoraAdapter* adapter(const std::string& target) const {
    static const LoraAdapter kNone;
    const auto it = lora_.find(target);
    return it == lora_.end() ? &kNone : &it->second;
  }

  LlamaConfig config_;
  std::string prefix_;
  // p = config_.tp.size: split parameters hold this rank's part, the norms are replicated.
  at::Tensor input_norm_;        // (C)
  at::Tensor q_;                 // (H d/p, C)
  at::Tensor k_, v_;             // (KV d/p, C), or (d, C) replicated over tp.kv_replicas ranks
  at::Tensor o_;                 // (C, H d/p)
  at::Tensor q_bias_;            // (H d/p) with qkv_bias; else undefined
  at::Tensor k_bias_, v_bias_;   // (KV d/p), or (d) replicated, with qkv_bias
  at::Tensor q_norm_, k_norm_;   // with qk_norm (llama.h: its shapes); else undefined
  at::Tensor mlp_norm_;          // (C)
  at::Tensor gate_, up_;         // (F/p, C); undefined in a sparse layer
  at::Tensor down_;              // (C, F/p)
  std::unique_ptr<MoeMlp> moe_;  // a sparse layer's MoE block
  std::map<std::string, LoraAdapter> lora_;  // by target ("q_proj"), with config_.lora
  KvCache cache_;                // keys and values while generating
};

class LlamaHead : public Layer {
 public:
  LlamaHead(const LlamaConfig& c, uint64_t seed)
      : config_(c),
        norm_(OnesParam({c.hidden})),
        // Tied: the embedding's name, so its initial value and its row shard.
        lm_head_(
            NormalTensor(lm_head_name(), VocabParallel(), {c.vocab, c.hidden}, seed, c, specs_)) {
    specs_.Declare("model.norm.weight", ReplicatedSpec(c.tp.splits_sequence()));
  }

  // x (n, T, C), or (n, T/tp, C) under sequence parallelism -> logits (n, T, r) of this rank's
  // r vocabulary rows (vocab_parallel.h)
  at::Tensor Forward(const at::Tensor& x, const MicroBatch& mb) override {
    const at::Tensor h = RmsNorm(x, norm_, config_.rms_norm_eps);
    return ColumnParallelLinears(h, {{lm_head_, at::Tensor()}}, config_.tp)[0];
  }

  bool has_loss() const override { return true; }

  at::Tensor LossSum(const at::Tensor& logits, const MicroBatch& mb) override {
    return VocabParallelCrossEntropySum(logits.reshape({-1, logits.size(-1)}),
                                        ContextShareOf(mb.targets, config_.cp).reshape({-1}),
                                        config_.tp, config_.vocab);
  }

  NamedTensors NamedParameters() override {
    return {{"model.norm.weight", norm_}, {lm_head_name(), lm_head_}};
  }
  std::vector<int64_t> InputShape(const MicroBatch& mb) const override {
    return HiddenShape(mb, config_.hidden, config_.tp, config_.cp);
  }
  std::vector<int64_t> OutputShape(const MicroBatch& mb) const override {
    return {mb.size(), config_.cp.local_length(mb.seq_len()),
            VocabularyRowsPerRank(config_.vocab, config_.tp.size)};
  }

 private:
  const char* lm_head_name() const { return config_.tie_embeddings ? kEmbedding : kLmHead; }

  LlamaConfig config_;
  at::Tensor norm_;     // (C), replicated
  at::Tensor lm_head_;  // (r, C): this rank's vocabulary rows; the embedding's when tied
};

}  // namespace

at::Tensor RmsNorm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  const at::Tensor x32 = x.to(at::kFloat);
  const at::Tensor normed = x32 * at::rsqrt(x32.pow(2).mean(-1, /*keepdim=*/true) + eps);
  return weight * normed.to(x.scalar_type());
}

at::Tensor RotaryEmbedding(const at::Tensor& x, double theta, int64_t first_position) {
  return RotaryEmbedding(
      x, theta,
      at::arange(first_position, first_position + x.size(2), x.options().dtype(at::kLong)));
}

at::Tensor RotaryEmbedding(const at::Tensor& x, double theta, const at::Tensor& positions) {
  const int64_t d = x.size(3), half = d / 2;
  const at::TensorOptions fp32 = x.options().dtype(at::kFloat);
  // Angles (T, d), or (n, 1, T, d) for positions (n, T): position times theta^(-2j/d), the
  // d/2 frequencies twice.
  const at::Tensor inv_freq = 1.0 / at::pow(theta, at::arange(0, d, 2, fp32) / d);  // (d/2)
  at::Tensor angles = positions.to(at::kFloat).unsqueeze(-1) * inv_freq;  // (..., T, d/2)
  if (positions.dim() == 2) angles = angles.unsqueeze(1);                 // (n, 1, T, d/2)
  const at::Tensor both = at::cat({angles, angles}, -1);
  const at::Tensor cos = both.cos().to(x.scalar_type()), sin = both.sin().to(x.scalar_type());
  const at::Tensor rotated = at::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
  return x * cos + rotated * sin;
}

void CheckLlamaConfig(const LlamaConfig& c) {
  CONVEYOR_CHECK(c.vocab >= 2) << "vocab must be at least 2, got " << c.vocab;
  CONVEYOR_CHECK(c.hidden >= 1) << "hidden must be at least 1, got " << c.hidden;
  CONVEYOR_CHECK(c.heads >= 1 && c.hidden % c.heads == 0)
      << "hidden (" << c.hidden << ") must be a multiple of heads (" << c.heads << ")";
  CONVEYOR_CHECK((c.hidden / c.heads) % 2 == 0)
      << "the head size hidden / heads = " << c.hidden / c.heads
      << " must be even: rotary embeddings rotate pairs of dimensions";
  CONVEYOR_CHECK(c.kv_heads >= 1 && c.heads % c.kv_heads == 0)
      << "kv_heads (" << c.kv_heads << ") must divide heads (" << c.heads << ")";
  CONVEYOR_CHECK(c.intermediate >= 1) << "intermediate must be at least 1, got " << c.intermediate;
  CONVEYOR_CHECK(c.layers >= 1) << "layers must be at least 1, got " << c.layers;
  CONVEYOR_CHECK(c.max_seq_len >= 1) << "max_seq_len must be at least 1, got " << c.max_seq_len;
  CONVEYOR_CHECK(c.rms_norm_eps > 0) << "rms_norm_eps must be positive, got " << c.rms_norm_eps;
  CONVEYOR_CHECK(c.rope_theta > 0) << "rope_theta must be positive, got " << c.rope_theta;
  CheckTensorParallel(c.tp, c.heads);
  CONVEYOR_CHECK(c.tp.kv_replicas == KvReplicas(c.kv_heads, c.tp.size))
      << "a Llama of " << c.kv_heads << " key-value heads over " << c.tp.size
      << " tensor-parallel ranks keeps each on " << KvReplicas(c.kv_heads, c.tp.size)
      << " of them, the model was built for " << c.tp.kv_replicas;
  CONVEYOR_CHECK(c.intermediate % c.tp.size == 0)
      << "intermediate (" << c.intermediate << ") must divide by the tensor-parallel size ("
      << c.tp.size << ")";
  CheckVocabularySplit(c.vocab, c.tp.size);
  CheckContextParallel(c.cp);
  CONVEYOR_CHECK(c.cp.size == 1 || !c.moe)
      << "context parallelism over " << c.cp.size
      << " ranks does not take Mixture-of-Experts layers yet: drop --cp or the experts";
  if (c.moe) {
    CheckMoeConfig(BlockOf(c));
    CONVEYOR_CHECK(c.moe->sparse_step >= 1 && c.moe->first_dense >= 0)
        << "the sparse step must be >= 1 and the first dense layers >= 0, got "
        << c.moe->sparse_step << " and " << c.moe->first_dense;
    CONVEYOR_CHECK(c.max_seq_len % c.tp.size == 0)
        << "a Mixture-of-Experts layer under --tp " << c.tp.size << " routes 1 / " << c.tp.size
        << " of the tokens on each tensor-parallel rank: the sequence's " << c.max_seq_len
        << " tokens must divide by it";
    CONVEYOR_CHECK(c.moe->block.experts % c.ep.size == 0)
        << "the " << c.moe->block.experts << " experts must divide evenly over --ep " << c.ep.size;
  }
  CONVEYOR_CHECK(c.qk_norm != QkNorm::kProjection || c.tp.size == 1)
      << "query and key norms over the whole projections (OLMoE) do not take --tp " << c.tp.size
      << " yet (each rank holds only its heads' part)";
  if (c.lora) CheckLlamaLora(c);
}

bool LlamaMoe::IsSparse(int i) const {
  if (i < first_dense || (i + 1) % sparse_step != 0) return false;
  return std::find(dense_layers.begin(), dense_layers.end(), i) == dense_layers.end();
}

bool IsSparseLayer(const LlamaConfig& c, int i) { return c.moe && c.moe->IsSparse(i); }

std::vector<ParameterShapes> LlamaLayerShapes(const LlamaConfig& c) {
  const std::vector<int64_t> table = {c.vocab, c.hidden};
  std::vector<ParameterShapes> layers = {{{kEmbedding, table}}};
  for (int i = 0; i < c.layers; ++i) layers.push_back(DecoderShapes(c, i));
  layers.push_back(
      {{"model.norm.weight", {c.hidden}}, {c.tie_embeddings ? kEmbedding : kLmHead, table}});
  return layers;
}

ParameterShapes LlamaParameterShapes(const LlamaConfig& config) {
  ParameterShapes all;
  for (const ParameterShapes& layer : LlamaLayerShapes(config))
    all.insert(layer.begin(), layer.end());
  return all;
}

LayerList BuildLlama(const LlamaConfig& config, uint64_t seed, int begin, int end) {
  CheckLlamaConfig(config);
  const int count = config.layers + 2;
  return BuildLayerRange(count, begin, end, [&](int l) -> std::shared_ptr<Layer> {
    std::shared_ptr<Layer> layer;
    if (l == 0) {
      layer = std::make_shared<LlamaEmbedding>(config, seed);
    } else if (l == count - 1) {
      layer = std::make_shared<LlamaHead>(config, seed);
    } else {
      layer = std::make_shared<LlamaDecoderLayer>(config, seed, l - 1);
    }
    if (config.lora) {  // only the adapters train
      for (const auto& [name, p] : layer->NamedParameters()) {
        if (!IsLoraParameter(name)) p.requires_grad_(false);
      }
    }
    return layer;
  });
}

}  // namespace conveyor
