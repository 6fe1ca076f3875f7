#include "conveyor/train/llama_architecture.h"

#include <limits>
#include <sstream>
#include <utility>

#include "conveyor/common/error.h"
#include "conveyor/data/byte_tokenizer.h"
#include "conveyor/nn/tensor_parallel_split.h"

namespace conveyor {
namespace {

// ModelSpec::qk_norm's names of LlamaConfig::qk_norm.
std::string QkNormName(QkNorm norm) {
  return norm == QkNorm::kHead ? "head" : norm == QkNorm::kProjection ? "projection" : "";
}
QkNorm QkNormOf(const std::string& name) {
  CONVEYOR_CHECK(name.empty() || name == "head" || name == "projection")
      << "qk_norm \"" << name << "\" is none of \"\", \"head\", \"projection\"";
  return name == "head"         ? QkNorm::kHead
         : name == "projection" ? QkNorm::kProjection
                                : QkNorm::kNone;
}

class LlamaModel : public ModelTask {
 public:
  // `folder`: a Hugging Face folder holding the initial weights (empty: drawn from the seed);
  // `sizes`: the same model's, as the planner prices it.
  LlamaModel(const LlamaConfig& config, TransformerSpec sizes, uint64_t seed, std::string folder)
      : config_(config), sizes_(std::move(sizes)), seed_(seed), folder_(std::move(folder)) {}

  int num_layers() const override { return config_.layers + 2; }
  // Weights from a folder are read into undrawn parameters: drawing them first would cost
  // about as much as reading them.
  LayerList BuildLayers(const ParallelContext& parallel, LayerRange range) const override {
    LlamaConfig config = config_;
    config.tp = parallel.tp;
    config.ep = parallel.ep;
    config.cp = parallel.cp;
    config.weights = folder_.empty() ? WeightInit::kDrawn : WeightInit::kUndrawn;
    LayerList layers = BuildLlama(config, seed_, range.begin, range.end);
    if (!folder_.empty()) LoadFromFolder(folder_, layers, parallel.tp);
    return layers;
  }
  std::vector<ParameterShapes> LayerShapes() const override { return LlamaLayerShapes(config_); }
  std::vector<double> LayerFlops() const override {
    // The sequence's tokens through each layer: the embedding's lookup, each decoder layer's
    // forward (TransformerSpec: a sparse one's router, top-k experts and shared expert), the
    // head's product.
    const double t = static_cast<double>(sizes_.seq_len), c = static_cast<double>(sizes_.hidden);
    std::vector<double> flops = {t * c};
    for (int64_t l = 0; l < sizes_.layers; ++l) {
      flops.push_back(t * sizes_.BlockForwardFlops(sizes_.IsSparse(l)));
    }
    flops.push_back(2.0 * c * static_cast<double>(sizes_.vocab) * t);
    return flops;
  }
  std::string Describe() const override {
    std::ostringstream out;
    out << "llama" << (folder_.empty() ? "" : " from " + folder_) << ": " << config_.layers
        << " layers, hidden " << config_.hidden << ", " << config_.heads << " heads ("
        << config_.kv_heads << " key-value), MLP " << config_.intermediate;
    if (config_.moe) {
      const MoeConfig& block = config_.moe->block;
      out << ", " << ExpertBlocks().size() << " MoE layers of " << block.experts << " experts (top-"
          << block.top_k << ", " << block.expert_units << " units each"
          << (block.shared_units > 0 ? ", a shared expert" : "") << ")";
    }
    out << ", vocabulary " << config_.vocab << ", " << CountParameters(LayerShapes()) / 1e6
        << "M parameters";
    return out.str();
  }
  std::vector<std::string> AuxiliaryLossNames() const override {
    std::vector<std::string> names;
    if (!config_.moe) return names;
    if (config_.moe->block.aux_loss_coef > 0) names.push_back("load_balance");
    if (config_.moe->block.z_loss_coef > 0) names.push_back("router_z");
    return names;
  }
  std::vector<std::pair<std::string, int>> ExpertBlocks() const override {
    std::vector<std::pair<std::string, int>> blocks;
    for (int l = 0; l < config_.layers; ++l) {
      if (IsSparseLayer(config_, l)) {
        blocks.push_back({"model.layers." + std::to_string(l) + "." + config_.moe->prefix,
                          config_.moe->block.experts});
      }
    }
    return blocks;
  }

 private:
  LlamaConfig config_;
  TransformerSpec sizes_;
  uint64_t seed_;
  std::string folder_;
};

}  // namespace

TransformerSpec LlamaArchitecture::Sizes(const ModelSpec& spec) const {
  TransformerSpec sizes{
      .layers = spec.layers,
      .hidden = spec.hidden,
      .heads = spec.heads,
      .kv_heads = spec.kv_heads,
      .intermediate = spec.intermediate,
      .vocab = spec.vocab > 0 ? spec.vocab : static_cast<int64_t>(ByteTokenizer::kVocabSize),
      .seq_len = spec.seq_len,
      .gated_mlp = true};
  sizes.kv_heads = sizes.kv();       // kv_heads 0: heads
  sizes.intermediate = sizes.mlp();  // intermediate 0: GatedMlpUnits(hidden)
  if (spec.experts > 0) {
    sizes.experts = spec.experts;
    sizes.top_k = spec.top_k;
    sizes.expert_units = spec.expert_units;  // 0: intermediate, as the layer builds it
    sizes.shared_units = spec.shared_expert_units;
    const LlamaMoe layers{.first_dense = spec.moe_first_dense,
                          .sparse_step = spec.moe_sparse_step,
                          .dense_layers = spec.moe_dense_layers};
    for (int l = 0; l < spec.layers; ++l) {
      if (!layers.IsSparse(l)) sizes.dense_blocks.push_back(l);
    }
  }
  return sizes;
}

void LlamaArchitecture::Check(const ModelSpec& spec, int tp) const {
  const TransformerSpec sizes = Sizes(spec);
  CONVEYOR_CHECK(spec.lora_rank > 0 || (spec.lora_alpha == 0 && spec.lora_targets.empty()))
      << "--lora-alpha or --lora-targets without --lora-rank: LoRA adapters need a rank of at "
         "least 1";
  if (spec.lora_rank > 0) LlamaConfigOf(spec);  // the targets and the rank (CheckLlamaConfig)
  if (spec.experts > 0) {
    CONVEYOR_CHECK(spec.top_k <= spec.experts)
        << "--top-k " << spec.top_k << " must be at most --experts " << spec.experts;
    CONVEYOR_CHECK(spec.seq_len % tp == 0)
        << "--experts with --tp " << tp << ": each tensor-parallel rank routes 1 / " << tp
        << " of the tokens, so --seq-len " << spec.seq_len << " must divide by it";
  }
  const int kv = static_cast<int>(sizes.kv_heads);
  CONVEYOR_CHECK(spec.heads % kv == 0)
      << "kv-heads (" << kv << ") must divide heads (" << spec.heads << ")";
  KvReplicas(kv, tp);  // tp divides the key-value heads, or they divide tp (replicated)
  CONVEYOR_CHECK(sizes.intermediate % tp == 0)
      << "intermediate (" << sizes.intermediate << ") must divide by tp (" << tp << ")";
  CONVEYOR_CHECK((spec.hidden / spec.heads) % 2 == 0)
      << "the head size hidden / heads = " << spec.hidden / spec.heads
      << " must be even: rotary embeddings rotate pairs of dimensions";
}

int LlamaArchitecture::ContextLimit(const ModelSpec&) const {
  return std::numeric_limits<int>::max();  // rotary positions have no bound
}

void LlamaArchitecture::ReadHfConfig(const HfModelConfig& folder, const std::string& path,
                                     ModelSpec& spec) const {
  const LlamaConfig& llama = folder.llama;
  SetModelInteger(spec, "hidden", llama.hidden, path + ": hidden_size");
  SetModelInteger(spec, "heads", llama.heads, path + ": num_attention_heads");
  SetModelInteger(spec, "kv_heads", llama.kv_heads, path + ": num_key_value_heads");
  SetModelInteger(spec, "layers", llama.layers, path + ": num_hidden_layers");
  SetModelInteger(spec, "intermediate", llama.intermediate, path + ": intermediate_size");
  spec.vocab = llama.vocab;
  spec.rms_norm_eps = llama.rms_norm_eps;
  SetModelReal(spec, "rope_theta", llama.rope_theta, path + ": rope_theta");
  spec.tie_embeddings = llama.tie_embeddings;
  spec.qk_norm = QkNormName(llama.qk_norm);
  spec.qkv_bias = llama.qkv_bias;
  if (llama.moe) {
    const LlamaMoe& moe = *llama.moe;
    SetModelInteger(spec, "experts", moe.block.experts, path + ": the number of experts");
    SetModelInteger(spec, "top_k", moe.block.top_k, path + ": num_experts_per_tok");
    SetModelInteger(spec, "expert_units", moe.block.expert_units, path + ": an expert's units");
    spec.shared_expert_units = moe.block.shared_units;
    spec.shared_expert_gate = moe.block.shared_gate;
    spec.router_sigmoid = moe.block.scoring == RouterScoring::kSigmoid;
    spec.router_plain_gates = !moe.block.renormalize;
    spec.moe_first_dense = moe.first_dense;
    SetModelInteger(spec, "moe_sparse_step", moe.sparse_step, path + ": decoder_sparse_step");
    spec.moe_dense_layers = moe.dense_layers;
    spec.moe_mixtral_names = moe.block.mixtral_names;
  }
  CONVEYOR_CHECK(spec.seq_len <= llama.max_seq_len)
      << "--seq-len " << spec.seq_len << " exceeds " << path << "'s max_position_embeddings ("
      << llama.max_seq_len << ")";
}

HfModelConfig LlamaArchitecture::HfConfig(const ModelSpec& spec) const {
  HfModelConfig folder;
  folder.llama = LlamaConfigOf(spec);
  folder.llama.lora.reset();  // a Hugging Face folder holds the (merged) weights alone
  folder.type = HfLlamaModelType(folder.llama);
  return folder;
}

void LlamaArchitecture::RecordFields(const ModelSpec& spec, nlohmann::json& model) const {
  const TransformerSpec sizes = Sizes(spec);
  if (!spec.qk_norm.empty()) model["qk_norm"] = spec.qk_norm;
  if (spec.qkv_bias) model["qkv_bias"] = true;
  if (spec.experts > 0) {  // older checkpoints have none of these
    const LlamaConfig config = LlamaConfigOf(spec);
    const MoeConfig& block = config.moe->block;
    model["moe"] = {{"experts", block.experts},
                    {"top_k", block.top_k},
                    {"expert_units", block.expert_units},
                    {"shared_expert_units", block.shared_units},
                    {"shared_expert_gate", block.shared_gate},
                    {"router_sigmoid", spec.router_sigmoid},
                    {"router_plain_gates", spec.router_plain_gates},
                    {"first_dense", spec.moe_first_dense},
                    {"sparse_step", spec.moe_sparse_step},
                    {"dense_layers", spec.moe_dense_layers},
                    {"mixtral_names", spec.moe_mixtral_names}};
  }
  if (spec.lora_rank > 0) {  // older checkpoints have none
    const LoraConfig lora = *LlamaConfigOf(spec).lora;
    model["lora"] = {{"rank", lora.rank}, {"alpha", lora.alpha}, {"targets", lora.targets}};
  }
  model["kv_heads"] = static_cast<int>(sizes.kv_heads);
  model["intermediate"] = static_cast<int>(sizes.intermediate);
  model["rope_theta"] = spec.rope_theta;
  model["vocab"] = static_cast<int>(sizes.vocab);
  model["rms_norm_eps"] = spec.rms_norm_eps;
}

void LlamaArchitecture::ReadFields(const nlohmann::json& model, ModelSpec& spec) const {
  spec.qk_norm = model.value("qk_norm", "");
  QkNormOf(spec.qk_norm);  // a name it knows
  spec.qkv_bias = model.value("qkv_bias", false);
  if (model.contains("moe")) {
    const nlohmann::json& moe = model.at("moe");
    spec.experts = moe.at("experts");
    spec.top_k = moe.at("top_k");
    spec.expert_units = moe.at("expert_units");
    spec.shared_expert_units = moe.at("shared_expert_units");
    spec.shared_expert_gate = moe.at("shared_expert_gate");
    spec.router_sigmoid = moe.at("router_sigmoid");
    spec.router_plain_gates = moe.at("router_plain_gates");
    spec.moe_first_dense = moe.at("first_dense");
    spec.moe_sparse_step = moe.at("sparse_step");
    spec.moe_dense_layers = moe.at("dense_layers").get<std::vector<int>>();
    spec.moe_mixtral_names = moe.at("mixtral_names");
  }
  if (model.contains("lora")) {
    const nlohmann::json& lora = model.at("lora");
    spec.lora_rank = lora.at("rank");
    spec.lora_alpha = lora.at("alpha");
    std::string targets;
    for (const std::string& target : lora.at("targets").get<std::vector<std::string>>()) {
      targets += (targets.empty() ? "" : ",") + target;
    }
    spec.lora_targets = targets;
  }
  spec.kv_heads = model.at("kv_heads");
  spec.intermediate = model.at("intermediate");
  spec.rope_theta = model.at("rope_theta");
  spec.vocab = model.at("vocab");
  spec.rms_norm_eps = model.at("rms_norm_eps");
}

std::shared_ptr<const ModelTask> LlamaArchitecture::MakeModel(const ModelSpec& spec,
                                                              bool recompute_attention,
                                                              uint64_t seed) const {
  return std::make_shared<LlamaModel>(LlamaConfigOf(spec, recompute_attention), Sizes(spec), seed,
                                      spec.model_dir);
}

LlamaConfig LlamaConfigOf(const ModelSpec& spec, bool recompute_attention) {
  const TransformerSpec sizes = LlamaArchitecture().Sizes(spec);
  LlamaConfig config;
  config.vocab = static_cast<int>(sizes.vocab);
  config.hidden = spec.hidden;
  config.intermediate = static_cast<int>(sizes.intermediate);
  config.rms_norm_eps = spec.rms_norm_eps;
  config.heads = spec.heads;
  config.kv_heads = static_cast<int>(sizes.kv_heads);
  config.layers = spec.layers;
  config.max_seq_len = spec.seq_len;
  config.rope_theta = spec.rope_theta;
  config.tie_embeddings = spec.tie_embeddings;
  config.recompute_attention = recompute_attention;
  config.qk_norm = QkNormOf(spec.qk_norm);
  config.qkv_bias = spec.qkv_bias;
  if (spec.lora_rank > 0) {
    config.lora =
        LoraConfig{.rank = spec.lora_rank,
                   .alpha = spec.lora_alpha > 0 ? spec.lora_alpha : spec.lora_rank,  // 0: scale 1
                   .targets = ParseLoraTargets(spec.lora_targets, "--lora-targets")};
  }
  if (spec.experts > 0) {
    LlamaMoe moe;
    MoeConfig& block = moe.block;
    block.experts = spec.experts;
    block.top_k = spec.top_k;
    block.expert_units = spec.expert_units > 0 ? spec.expert_units : config.intermediate;
    block.shared_units = spec.shared_expert_units;
    block.shared_gate = spec.shared_expert_gate;
    block.scoring = spec.router_sigmoid ? RouterScoring::kSigmoid : RouterScoring::kSoftmax;
    block.renormalize = !spec.router_plain_gates;
    block.aux_loss_coef = spec.router_aux_loss_coef;
    block.z_loss_coef = spec.router_z_loss_coef;
    block.bias_rate = spec.router_bias_rate;
    block.capacity_factor = spec.capacity_factor;
    block.drop_by = spec.drop_by_position ? TokenDrop::kPosition : TokenDrop::kProbability;
    block.mixtral_names = spec.moe_mixtral_names;
    moe.prefix = spec.moe_mixtral_names ? "block_sparse_moe" : "mlp";
    moe.first_dense = spec.moe_first_dense;
    moe.sparse_step = spec.moe_sparse_step;
    moe.dense_layers = spec.moe_dense_layers;
    config.moe = moe;
  }
  CheckLlamaConfig(config);
  return config;
}

}  // namespace conveyor
