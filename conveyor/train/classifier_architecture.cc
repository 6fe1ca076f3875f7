#include "conveyor/train/classifier_architecture.h"

#include <sstream>

#include "conveyor/data/byte_tokenizer.h"
#include "conveyor/nn/classifier.h"

namespace conveyor {
namespace {

class ClassifierModel : public ModelTask {
 public:
  ClassifierModel(const ClassifierConfig& config, uint64_t seed) : config_(config), seed_(seed) {}

  int num_layers() const override { return config_.layers + 2; }
  LayerList BuildLayers(const ParallelContext& parallel, LayerRange range) const override {
    ClassifierConfig config = config_;
    config.tp = parallel.tp;
    return BuildClassifier(config, seed_, range.begin, range.end);
  }
  std::vector<double> LayerFlops() const override {
    return TransformerFlops(
        config_.layers, config_.max_seq_len, config_.hidden,
        2.0 * config_.hidden * (config_.hidden + config_.classes) / config_.max_seq_len);
  }
  std::string Describe() const override {
    std::ostringstream out;
    out << "classifier: " << config_.layers << " blocks, hidden " << config_.hidden << ", "
        << config_.classes << " classes";
    return out.str();
  }

 private:
  ClassifierConfig config_;
  uint64_t seed_;
};

}  // namespace

TransformerSpec ClassifierArchitecture::Sizes(const ModelSpec& spec) const {
  return TransformerSpec{.layers = spec.layers,
                         .hidden = spec.hidden,
                         .heads = spec.heads,
                         .kv_heads = spec.heads,
                         .intermediate = 4 * int64_t{spec.hidden},
                         .vocab = static_cast<int64_t>(ByteTokenizer::kVocabSize),
                         .seq_len = spec.seq_len,
                         .gated_mlp = false};
}

std::shared_ptr<const ModelTask> ClassifierArchitecture::MakeModel(const ModelSpec& spec,
                                                                   bool recompute_attention,
                                                                   uint64_t seed) const {
  ClassifierConfig config{static_cast<int>(ByteTokenizer::kVocabSize),
                          spec.hidden,
                          spec.heads,
                          spec.layers,
                          spec.seq_len,
                          spec.classes,
                          recompute_attention,
                          {}};
  CheckClassifierConfig(config);
  return std::make_shared<ClassifierModel>(config, seed);
}

}  // namespace conveyor
