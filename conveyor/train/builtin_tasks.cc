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
#include "conveyor/nn/classifier.h"
#include "conveyor/train/model_registry.h"

namespace conveyor {
namespace {

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
  // A data set is read a replica's rows at a time; the whole batch's targets from its loss
  // masks alone (every target of its windows without).
  ReplicaBatch TrainShare(int64_t step, int replica, int replicas) const override {
    if constexpr (std::is_same_v<Stream, BlendedLmStream>) {
      const int64_t n = stream_.options().batch_size;
      CONVEYOR_CHECK(n >= replicas) << "a batch of " << n << " samples cannot be shared by "
                                    << replicas << " data-parallel replicas";
      const auto [first, size] = PartOf(n, replica, replicas);
      return {stream_.GetRows(step, first, first + size),
              static_cast<double>(std::max<int64_t>(stream_.BatchTargets(step), 1))};
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
  CONVEYOR_CHECK(!c.document_mask)
      << "--document-mask needs a tokenized data set (--data PREFIX, whose index says where "
      << "each document starts); --data " << c.data << " is text";
  const Corpus corpus = LoadCorpus(c.data);
  LmStream stream(corpus, LmStreamOptions{c.model.seq_len, c.batch_size, 0.05, c.seed});
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
  const int vocab = static_cast<int>(ModelSizes(c.model).vocab);
  BlendedLmStream stream(c.data, IndexedLmStreamOptions{c.model.seq_len, c.batch_size, vocab,
                                                        c.seed, ParseSplit(c.split),
                                                        c.document_mask});
  std::string data = stream.Describe();
  return std::make_shared<LanguageModelTask<BlendedLmStream>>(c, std::move(model),
                                                              std::move(stream), std::move(data));
}

class ClassifierTask : public TrainTask {
 public:
  explicit ClassifierTask(const TrainConfig& c)
      : model_(MakeModelTask(c)),
        corpus_(LoadCorpus(c.data)),
        task_(corpus_,
              ClassificationOptions{c.model.classes, c.model.seq_len, c.batch_size, 0.15, c.seed}) {
  }

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
  std::shared_ptr<const ModelTask> model_;
  Corpus corpus_;
  ClassificationTask task_;
};

}  // namespace

std::shared_ptr<const ModelTask> MakeModelTask(const TrainConfig& config) {
  return ArchitectureOf(config.model.kind)
      .MakeModel(config.model, config.recompute == Recompute::kSelective, config.seed);
}

std::shared_ptr<TrainTask> MakeTask(const TrainConfig& config) {
  if (!IsLanguageModel(config.model.kind)) return std::make_shared<ClassifierTask>(config);
  if (IsTokenData(config.data)) return DataSetTask(config, MakeModelTask(config));
  return TextTask(config, MakeModelTask(config));
}

}  // namespace conveyor
