// conveyor's SentencePiece plugin: conveyor/data/sentencepiece_plugin.h's functions over
// Debian's libsentencepiece. Built as a module of its own (never linked into a conveyor
// binary: see that header for why).
#include "conveyor/data/sentencepiece_plugin.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <cstdio>
#include <string>
#include <unordered_map>
#include <vector>

struct ConveyorSpm {
  sentencepiece::SentencePieceProcessor processor;
};

namespace {

void SetError(char* error, size_t error_size, const std::string& message) {
  if (error_size == 0) return;
  std::snprintf(error, error_size, "%s", message.c_str());
}

// The trainer's sentences, from the caller's arrays.
class Sentences : public sentencepiece::SentenceIterator {
 public:
  Sentences(const char* const* sentences, const size_t* lengths, size_t count)
      : sentences_(sentences), lengths_(lengths), count_(count) {
    Load();
  }
  bool done() const override { return next_ >= count_; }
  void Next() override {
    ++next_;
    Load();
  }
  const std::string& value() const override { return value_; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  void Load() {
    if (next_ < count_) value_.assign(sentences_[next_], lengths_[next_]);
  }
  const char* const* sentences_;
  const size_t* lengths_;
  size_t count_;
  size_t next_ = 0;
  std::string value_;
};

}  // namespace

extern "C" {

__attribute__((visibility("default"))) ConveyorSpm* conveyor_spm_load(const char* path, char* error,
                                                                      size_t error_size) {
  auto* model = new ConveyorSpm;
  const sentencepiece::util::Status status = model->processor.Load(path);
  if (!status.ok()) {
    SetError(error, error_size, status.ToString());
    delete model;
    return nullptr;
  }
  return model;
}

__attribute__((visibility("default"))) void conveyor_spm_free(ConveyorSpm* model) { delete model; }

__attribute__((visibility("default"))) int64_t conveyor_spm_info(const ConveyorSpm* model,
                                                                 int what) {
  switch (what) {
    case 0:
      return model->processor.GetPieceSize();
    case 1:
      return model->processor.bos_id();
    case 2:
      return model->processor.eos_id();
  }
  return -1;
}

__attribute__((visibility("default"))) int conveyor_spm_encode(const ConveyorSpm* model,
                                                               const char* text, size_t size,
                                                               ConveyorSpmSink sink,
                                                               void* sink_state, char* error,
                                                               size_t error_size) {
  std::vector<int> ids;
  const sentencepiece::util::Status status =
      model->processor.Encode(std::string_view(text, size), &ids);
  if (!status.ok()) {
    SetError(error, error_size, status.ToString());
    return 1;
  }
  static_assert(sizeof(int) == sizeof(int32_t));
  sink(sink_state, ids.data(), ids.size());
  return 0;
}

__attribute__((visibility("default"))) int conveyor_spm_decode(const ConveyorSpm* model,
                                                               const int32_t* ids, size_t count,
                                                               ConveyorSpmSink sink,
                                                               void* sink_state, char* error,
                                                               size_t error_size) {
  std::string text;
  const sentencepiece::util::Status status =
      model->processor.Decode(std::vector<int>(ids, ids + count), &text);
  if (!status.ok()) {
    SetError(error, error_size, status.ToString());
    return 1;
  }
  sink(sink_state, text.data(), text.size());
  return 0;
}

__attribute__((visibility("default"))) int conveyor_spm_train(
    const char* const* keys, const char* const* values, size_t num_options,
    const char* const* sentences, const size_t* lengths, size_t num_sentences, ConveyorSpmSink sink,
    void* sink_state, char* error, size_t error_size) {
  std::unordered_map<std::string, std::string> options;
  for (size_t i = 0; i < num_options; ++i) options[keys[i]] = values[i];
  Sentences iterator(sentences, lengths, num_sentences);
  std::string model;
  const sentencepiece::util::Status status =
      sentencepiece::SentencePieceTrainer::Train(options, &iterator, &model);
  if (!status.ok()) {
    SetError(error, error_size, status.ToString());
    return 1;
  }
  sink(sink_state, model.data(), model.size());
  return 0;
}

}  // extern "C"
