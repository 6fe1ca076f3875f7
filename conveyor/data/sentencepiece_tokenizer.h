// A SentencePiece model (Kudo and Richardson, "SentencePiece: A simple and language
// independent subword tokenizer and detokenizer for Neural Text Processing", EMNLP 2018)
// through Debian's libsentencepiece: the tokenizer.model of Llama 1/2, T5 and many others.
// Loading one, and training a new one on a corpus (TrainSentencePiece).
//
// The library is reached through conveyor's plugin (sentencepiece_plugin.h), loaded at the
// first use. A build without the library (a machine built from the dependency bundle) has
// no plugin: the constructor and TrainSentencePiece then throw UserError saying so.
//
// Thread-safety: a loaded tokenizer is immutable; Encode and Decode are safe from any thread.
#ifndef CONVEYOR_DATA_SENTENCEPIECE_TOKENIZER_H_
#define CONVEYOR_DATA_SENTENCEPIECE_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "conveyor/data/tokenizer.h"

namespace conveyor {

// Whether SentencePiece can be used: this build has the plugin and it loads.
bool HaveSentencePiece();

class SentencePieceTokenizer : public Tokenizer {
 public:
  // Loads the model file at `path`. Throws UserError naming the path when it cannot be read
  // or is not a SentencePiece model.
  explicit SentencePieceTokenizer(const std::string& path);
  ~SentencePieceTokenizer() override;

  int64_t vocab_size() const override;
  std::vector<int64_t> Encode(std::string_view text) const override;
  std::string Decode(std::span<const int64_t> tokens) const override;
  int64_t bos_id() const override;
  int64_t eos_id() const override;
  int64_t end_of_document() const override;
  std::string Describe() const override;

 private:
  struct Model;  // the library's processor
  std::string path_;
  std::unique_ptr<const Model> model_;
};

struct SentencePieceTrainOptions {
  std::vector<std::string> inputs;  // text or JSON Lines files (text_documents.h)
  std::string json_key;             // as TextDocumentOptions
  int64_t vocab_size = 8000;
  std::string model_type = "bpe";  // "bpe" or "unigram"
  // Sentences (lines of the documents) the trainer samples at most; the rest are skipped.
  int64_t max_sentences = 2000000;
  int threads = 0;  // 0 = every core
};

// Trains a model on the documents of the inputs, each line a sentence, with Llama's
// choices: identity normalization and whitespace kept (text decodes to exactly itself, but
// that U+2581, the library's meta symbol for a space, decodes as a space),
// digits split, byte fallback (a character outside the
// vocabulary becomes its UTF-8 bytes, never an unknown id), ids unk 0, bos 1, eos 2, as
// Llama's. Writes it to `out` atomically (nothing under that name unless it completes)
// and returns the number of sentences trained on. Throws UserError for bad options or
// inputs, and with the trainer's message when it refuses (a vocabulary larger than the
// corpus allows, for one).
int64_t TrainSentencePiece(const SentencePieceTrainOptions& options, const std::string& out);

}  // namespace conveyor

#endif  // CONVEYOR_DATA_SENTENCEPIECE_TOKENIZER_H_
