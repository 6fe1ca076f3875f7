#include "conveyor/train/builtin_tasks.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <type_traits>

#include "conveyor/common/error.h"
#include "conveyor/data/blended_lm_stream.h"
#include "conveyor/data/byte_tokenizer.h"
#include "conveyor/data/classification.h"
#include "conveyor/data/corpus.h"
#include "conveyor/data/lm_stream.h"
#include "conveyor/formats/hf_checkpoint.h"
#include "conveyor/nn/classifier.h"
#include "conveyor/nn/gpt.h"
#include "conveyor/nn/llama.h"

namespace conveyor {
namespace {

// Forward FLOPs per sample of a transformer stack: embedding, blocks, then `head` per token.
std::vector<double> TransformerFlops(int layers, double t, double c, double head_per_token) {
  std::vector<double> flops = {t * c};  // embedding: a lookup and an add
  for (int l = 0; l < layers; ++l) flops.push_back(t * (24 * c * c + 4 * t * c));
  flops.push_back(head_per_token * t);
  return flops;
}

// The parameters of `layers`, read from the Hugging Face folder `folder` (the part of
// tensor-parallel rank tp.rank) and nothing else of it.
void LoadFromFolder(const std::string& folder, const LayerList& layers, const TensorParallel& tp) {
  NamedTensors params;
  for (const auto& layer : layers) {
    for (auto& named : layer->NamedParameters()) params.push_back(std::move(named));
  }
  HfCheckpoint(folder).LoadInto(params, ParameterSpecsOf(layers), tp);
}

ClassifierConfig ClassifierConfigOf(const TrainConfig& c) {
  ClassifierConfig config{static_cast<int>(ByteTokenizer::kVocabSize),
                          c.hidden,
                          c.heads,
                          c.layers,
                          c.seq_len,
                          c.classes,
                          c.recompute == Recompute::kSelective,
                          {}};
  CheckClassifierConfig(config);
  return config;
}

class GptModel : public ModelTask {
 public:
  // `folder`: a Hugging Face GPT-2 folder holding the initial weights (empty: drawn).
  GptModel(const GptConfig& config, uint64_t seed, std::string folder)
      : config_(config), seed_(seed), folder_(std::move(folder)) {}

  int num_layers() const override { return config_.layers + 2; }
  LayerList BuildLayers(const ParallelContext& parallel, LayerRange range) const override {
    GptConfig config = config_;
    config.tp = parallel.tp;
    config.draw_weights = folder_.empty();  // drawing would cost about what reading does
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

// Next-token prediction for a language model (gpt, llama) from a stream of batches: LmStream
// over a text's bytes, or BlendedLmStream over tokenized data (token ids, so a model of
// any vocabulary). Both give Get(step), EvalBatches(), GetEval(i) and their options.
template <typename Stream>
class LanguageModelTask : public TrainTask {
 public:
  // `data`: what the data are, for Describe.
  LanguageModelTask(const TrainConfig& c, std::shared_ptr<const ModelTask> model, Stream stream,
                    std::string data)
      : model_(std::move(model)),
        eval_batches_(c.eval_batches),
        stream_(std::move(stream)),
        data_(std::move(data)) {}

  std::shared_ptr<const ModelTask> model() const override { return model_; }
  Batch TrainBatch(int64_t step) const override { return stream_.Get(step); }
  // A data set is read a replica's rows at a time; every target of its windows counts.
  ReplicaBatch TrainShare(int64_t step, int replica, int replicas) const override {
    if constexpr (std::is_same_v<Stream, BlendedLmStream>) {
      const int64_t n = stream_.options().batch_size;
      CONVEYOR_CHECK(n >= replicas) << "a batch of " << n << " samples cannot be shared by "
                                    << replicas << " data-parallel replicas";
      const auto [first, size] = PartOf(n, replica, replicas);
      return {stream_.GetRows(step, first, first + size),
              static_cast<double>(n * stream_.options().seq_len)};
    } else {
      return TrainTask::TrainShare(step, replica, replicas);
    }
  }
  std::vector<Batch> EvalBatches() const override {
    std::vector<Batch> batches;
    const int64_t n = std::min<int64_t>(eval_batches_, stream_.EvalBatches());
    for (int64_t i = 0; i < n; ++i) batches.push_back(stream_.GetEval(i));
    return batches;
  }
  double TokensPerBatch() const override {
    return static_cast<double>(stream_.options().batch_size * stream_.options().seq_len);
  }
  std::string Describe() const override { return model_->Describe() + "; " + data_; }

 private:
  std::shared_ptr<const ModelTask> model_;
  int eval_batches_;
  Stream stream_;
  std::string data_;
};

// The task of a text corpus, read as bytes.
std::shared_ptr<TrainTask> TextTask(const TrainConfig& c, std::shared_ptr<const ModelTask> model) {
  CONVEYOR_CHECK(c.tokenizer.empty() || c.tokenizer == "bytes")
      << "--data " << c.data << " is text, which a run reads as bytes; to train on it with the "
      << "tokenizer " << c.tokenizer << ", tokenize it once: conveyor data prepare --input "
      << c.data << " --tokenizer " << c.tokenizer << " --out PREFIX, then --data PREFIX";
  const Corpus corpus = LoadCorpus(c.data);
  LmStream stream(corpus, LmStreamOptions{c.seq_len, c.batch_size, 0.05, c.seed});
  std::ostringstream data;
  data << "corpus " << corpus.source << ": " << corpus.documents.size() << " documents, "
       << corpus.TotalBytes() << " bytes (" << stream.train_text().size() << " train / "
       << stream.held_out_text().size() << " held out)";
  return std::make_shared<LanguageModelTask<LmStream>>(c, std::move(model), std::move(stream),
                                                       data.str());
}

// The task of tokenized data: one token source or several blended.
std::shared_ptr<TrainTask> DataSetTask(const TrainConfig& c,
                                       std::shared_ptr<const ModelTask> model) {
  BlendedLmStream stream(c.data, IndexedLmStreamOptions{c.seq_len, c.batch_size, ModelVocab(c),
                                                        c.seed, ParseSplit(c.split)});
  std::string data = stream.Describe();
  return std::make_shared<LanguageModelTask<BlendedLmStream>>(c, std::move(model),
                                                              std::move(stream), std::move(data));
}

class ClassifierTask : public TrainTask {
 public:
  explicit ClassifierTask(const TrainConfig& c)
      : model_(std::make_shared<ClassifierModel>(ClassifierConfigOf(c), c.seed)),
        corpus_(LoadCorpus(c.data)),
        task_(corpus_, ClassificationOptions{c.classes, c.seq_len, c.batch_size, 0.15, c.seed}) {}

  std::shared_ptr<const ModelTask> model() const override { return model_; }
  Batch TrainBatch(int64_t step) const override { return task_.Get(step); }
  // The whole held-out split: accuracy is over every held-out document.
  std::vector<Batch> EvalBatches() const override {
    std::vector<Batch> batches;
    for (int64_t i = 0; i < task_.EvalBatches(); ++i) batches.push_back(task_.GetEval(i));
    return batches;
  }
  double TokensPerBatch() const override {
    return static_cast<double>(task_.options().batch_size * task_.options().seq_len);
  }
  bool has_accuracy() const override { return true; }
  double CountCorrect(const at::Tensor& logits, const MicroBatch& mb) const override {
    return static_cast<double>(conveyor::CountCorrect(logits, mb.targets));
  }
  std::string Describe() const override {
    std::ostringstream out;
    out << model_->Describe() << " (";
    for (size_t k = 0; k < task_.class_names().size(); ++k) {
      out << (k ? ", " : "") << task_.class_names()[k];
    }
    out << "); " << task_.train_size() << " train / " << task_.held_out_size()
        << " held-out documents; majority class " << 100 * task_.MajorityRate() << "% of held-out";
    return out.str();
  }
  double BaselineAccuracy() const override { return task_.MajorityRate(); }

 private:
  std::shared_ptr<const ClassifierModel> model_;
  Corpus corpus_;
  ClassificationTask task_;
};

}  // namespace

GptConfig GptConfigOf(const TrainConfig& c) {
  GptConfig config;
  config.vocab = ModelVocab(c);
  config.hidden = c.hidden;
  config.heads = c.heads;
  config.layers = c.layers;
  config.max_seq_len = std::max(c.seq_len, c.positions);
  config.tie_embeddings = c.tie_embeddings;
  config.recompute_attention = c.recompute == Recompute::kSelective;
  config.gelu_tanh = c.gelu_tanh;
  CheckGptConfig(config);
  return config;
}

LlamaConfig LlamaConfigOf(const TrainConfig& c) {
  LlamaConfig config;
  config.vocab = ModelVocab(c);
  config.hidden = c.hidden;
  config.intermediate = LlamaIntermediate(c);
  config.rms_norm_eps = c.rms_norm_eps;
  config.heads = c.heads;
  config.kv_heads = LlamaKvHeads(c);
  config.layers = c.layers;
  config.max_seq_len = c.seq_len;
  config.rope_theta = c.rope_theta;
  config.tie_embeddings = c.tie_embeddings;
  config.recompute_attention = c.recompute == Recompute::kSelective;
  CheckLlamaConfig(config);
  return config;
}

std::shared_ptr<const ModelTask> MakeModelTask(const TrainConfig& config) {
  switch (config.model) {
    case ModelKind::kClassifier:
      return std::make_shared<ClassifierModel>(ClassifierConfigOf(config), config.seed);
    case ModelKind::kLlama:
      return std::make_shared<LlamaModel>(LlamaConfigOf(config), config.seed, config.model_dir);
    case ModelKind::kGpt:
      break;
  }
  return std::make_shared<GptModel>(GptConfigOf(config), config.seed, config.model_dir);
}

std::shared_ptr<TrainTask> MakeTask(const TrainConfig& config) {
  if (config.model == ModelKind::kClassifier) return std::make_shared<ClassifierTask>(config);
  if (IsTokenData(config.data)) return DataSetTask(config, MakeModelTask(config));
  return TextTask(config, MakeModelTask(config));
}

}  // namespace conveyor
