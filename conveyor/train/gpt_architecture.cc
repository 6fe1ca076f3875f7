#include "conveyor/train/gpt_architecture.h"

#include <algorithm>
#include <sstream>
#include <utility>

#include "conveyor/common/error.h"
#include "conveyor/data/byte_tokenizer.h"

namespace conveyor {
namespace {

class GptModel : public ModelTask {
 public:
  // `folder`: a Hugging Face GPT-2 folder holding the initial weights (empty: drawn).
  GptModel(const GptConfig& config, uint64_t seed, std::string folder)
      : config_(config), seed_(seed), folder_(std::move(folder)) {}

  int num_layers() const override { return config_.layers + 2; }
  LayerList BuildLayers(const ParallelContext& parallel, LayerRange range) const override {
    GptConfig config = config_;
    config.tp = parallel.tp;
    // Drawing would cost about what reading does.
    config.weights = folder_.empty() ? WeightInit::kDrawn : WeightInit::kUndrawn;
    LayerList layers = BuildGpt(config, seed_, range.begin, range.end);
    if (!folder_.empty()) LoadFromFolder(folder_, layers, parallel.tp);
    return layers;
  }
  std::vector<ParameterShapes> LayerShapes() const override { return GptLayerShapes(config_); }
  std::vector<double> LayerFlops() const override {
    return TransformerFlops(config_.layers, config_.max_seq_len, config_.hidden,
                            2.0 * config_.hidden * config_.vocab);
  }
  std::string Describe() const override {
    std::ostringstream out;
    out << "gpt" << (folder_.empty() ? "" : " (GPT-2) from " + folder_) << ": " << config_.layers
        << " blocks, hidden " << config_.hidden << ", " << config_.heads << " heads, "
        << (config_.vocab == static_cast<int>(ByteTokenizer::kVocabSize)
                ? std::string()
                : "vocabulary " + std::to_string(config_.vocab) + ", ")
        << CountParameters(LayerShapes()) / 1e6 << "M parameters";
    return out.str();
  }

 private:
  GptConfig config_;
  uint64_t seed_;
  std::string folder_;
};

}  // namespace

TransformerSpec GptArchitecture::Sizes(const ModelSpec& spec) const {
  return TransformerSpec{
      .layers = spec.layers,
      .hidden = spec.hidden,
      .heads = spec.heads,
      .kv_heads = spec.heads,
      .intermediate = 4 * int64_t{spec.hidden},
      .vocab = spec.vocab > 0 ? spec.vocab : static_cast<int64_t>(ByteTokenizer::kVocabSize),
      .seq_len = spec.seq_len,
      .gated_mlp = false};
}

void GptArchitecture::ReadHfConfig(const HfModelConfig& folder, const std::string& path,
                                   ModelSpec& spec) const {
  const GptConfig& gpt = folder.gpt;
  SetModelInteger(spec, "hidden", gpt.hidden, path + ": n_embd");
  SetModelInteger(spec, "heads", gpt.heads, path + ": n_head");
  SetModelInteger(spec, "layers", gpt.layers, path + ": n_layer");
  spec.vocab = gpt.vocab;
  spec.positions = gpt.max_seq_len;
  spec.tie_embeddings = gpt.tie_embeddings;
  spec.gelu_tanh = gpt.gelu_tanh;
  CONVEYOR_CHECK(spec.seq_len <= spec.positions)
      << "--seq-len " << spec.seq_len << " exceeds " << path << "'s n_positions (" << spec.positions
      << ")";
}

HfModelConfig GptArchitecture::HfConfig(const ModelSpec& spec) const {
  HfModelConfig folder;
  folder.type = "gpt2";
  folder.gpt = GptConfigOf(spec);
  return folder;
}

// A GPT-2's fields, only where they differ from the byte-level GPT's (older checkpoints have
// none of them).
void GptArchitecture::RecordFields(const ModelSpec& spec, nlohmann::json& model) const {
  const int64_t vocab = Sizes(spec).vocab;
  if (vocab != static_cast<int64_t>(ByteTokenizer::kVocabSize)) model["vocab"] = vocab;
  if (spec.positions > spec.seq_len) model["positions"] = spec.positions;
  if (spec.gelu_tanh) model["gelu_tanh"] = true;
}

void GptArchitecture::ReadFields(const nlohmann::json& model, ModelSpec& spec) const {
  spec.vocab = model.value("vocab", 0);
  spec.positions = model.value("positions", 0);
  spec.gelu_tanh = model.value("gelu_tanh", false);
}

std::shared_ptr<const ModelTask> GptArchitecture::MakeModel(const ModelSpec& spec,
                                                            bool recompute_attention,
                                                            uint64_t seed) const {
  return std::make_shared<GptModel>(GptConfigOf(spec, recompute_attention), seed, spec.model_dir);
}

GptConfig GptConfigOf(const ModelSpec& spec, bool recompute_attention) {
  GptConfig config;
  config.vocab = static_cast<int>(GptArchitecture().Sizes(spec).vocab);
  config.hidden = spec.hidden;
  config.heads = spec.heads;
  config.layers = spec.layers;
  config.max_seq_len = std::max(spec.seq_len, spec.positions);
  config.tie_embeddings = spec.tie_embeddings;
  config.recompute_attention = recompute_attention;
  config.gelu_tanh = spec.gelu_tanh;
  CheckGptConfig(config);
  return config;
}

}  // namespace conveyor
