#include "conveyor/train/llama_architecture.h"

#include <limits>
#include <sstream>
#include <utility>

#include "conveyor/common/error.h"
#include "conveyor/data/byte_tokenizer.h"
#include "conveyor/nn/tensor_parallel_split.h"

namespace conveyor {
namespace {

class LlamaModel : public ModelTask {
 public:
  // `folder`: a Hugging Face folder holding the initial weights (empty: drawn from the seed).
  LlamaModel(const LlamaConfig& config, uint64_t seed, std::string folder)
      : config_(config), seed_(seed), folder_(std::move(folder)) {}

  int num_layers() const override { return config_.layers + 2; }
  // Weights from a folder are read into undrawn parameters: drawing them first would cost
  // about as much as reading them.
  LayerList BuildLayers(const ParallelContext& parallel, LayerRange range) const override {
    LlamaConfig config = config_;
    config.tp = parallel.tp;
    config.ep = parallel.ep;
    config.draw_weights = folder_.empty();
    LayerList layers = BuildLlama(config, seed_, range.begin, range.end);
    if (!folder_.empty()) LoadFromFolder(folder_, layers, parallel.tp);
    return layers;
  }
  std::vector<ParameterShapes> LayerShapes() const override { return LlamaLayerShapes(config_); }
  std::vector<double> LayerFlops() const override {
    // Per token of a decoder layer: q and o (2 C^2 each), k and v (2 C KV d each), the
    // three MLP matrices (2 C F each), attention (4 T C); as TransformerFlops counts it.
    const double t = config_.max_seq_len, c = config_.hidden;
    const double kv = static_cast<double>(config_.kv_heads) * c / config_.heads;
    std::vector<double> flops = {t * c};
    for (int l = 0; l < config_.layers; ++l) {
      flops.push_back(t * (4 * c * c + 4 * c * kv + 6 * c * config_.intermediate + 4 * t * c));
    }
    flops.push_back(2.0 * c * config_.vocab * t);
    return flops;
  }
  std::string Describe() const override {
    std::ostringstream out;
    out << "llama" << (folder_.empty() ? "" : " from " + folder_) << ": " << config_.layers
        << " layers, hidden " << config_.hidden << ", " << config_.heads << " heads ("
        << config_.kv_heads << " key-value), MLP " << config_.intermediate << ", vocabulary "
        << config_.vocab << ", " << CountParameters(LayerShapes()) / 1e6 << "M parameters";
    return out.str();
  }

 private:
  LlamaConfig config_;
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
  return sizes;
}

void LlamaArchitecture::Check(const ModelSpec& spec, int tp) const {
  const TransformerSpec sizes = Sizes(spec);
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
  CONVEYOR_CHECK(spec.seq_len <= llama.max_seq_len)
      << "--seq-len " << spec.seq_len << " exceeds " << path << "'s max_position_embeddings ("
      << llama.max_seq_len << ")";
}

HfModelConfig LlamaArchitecture::HfConfig(const ModelSpec& spec) const {
  HfModelConfig folder;
  folder.type = "llama";
  folder.llama = LlamaConfigOf(spec);
  return folder;
}

void LlamaArchitecture::RecordFields(const ModelSpec& spec, nlohmann::json& model) const {
  const TransformerSpec sizes = Sizes(spec);
  model["kv_heads"] = static_cast<int>(sizes.kv_heads);
  model["intermediate"] = static_cast<int>(sizes.intermediate);
  model["rope_theta"] = spec.rope_theta;
  model["vocab"] = static_cast<int>(sizes.vocab);
  model["rms_norm_eps"] = spec.rms_norm_eps;
}

void LlamaArchitecture::ReadFields(const nlohmann::json& model, ModelSpec& spec) const {
  spec.kv_heads = model.at("kv_heads");
  spec.intermediate = model.at("intermediate");
  spec.rope_theta = model.at("rope_theta");
  spec.vocab = model.at("vocab");
  spec.rms_norm_eps = model.at("rms_norm_eps");
}

std::shared_ptr<const ModelTask> LlamaArchitecture::MakeModel(const ModelSpec& spec,
                                                              bool recompute_attention,
                                                              uint64_t seed) const {
  return std::make_shared<LlamaModel>(LlamaConfigOf(spec, recompute_attention), seed,
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
  CheckLlamaConfig(config);
  return config;
}

}  // namespace conveyor
