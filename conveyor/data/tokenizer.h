// A tokenizer: text to token ids and back. Two kinds: the byte tokenizer (byte_tokenizer.h,
// the default: id = byte value) and a SentencePiece model (sentencepiece_tokenizer.h, the
// tokenizer.model of Llama 1/2, T5 and others, or one `conveyor tokenizer train` made).
//
// A document, as a data set stores it and a model learns it (DocumentTokens): the
// tokenizer's beginning-of-sequence id when it has one, the text's tokens, then its
// end-of-document: the end-of-sequence id, or a newline for the byte tokenizer (which has
// no special ids). A prompt starts as a document does (PromptTokens). Megatron's Llama
// data are made the same way (a BOS from the tokenizer, an EOS appended per document).
//
// Thread-safety: implementations are immutable after construction; every method is safe
// from any thread.
#ifndef CONVEYOR_DATA_TOKENIZER_H_
#define CONVEYOR_DATA_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace conveyor {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Ids are in [0, vocab_size()).
  virtual int64_t vocab_size() const = 0;
  virtual std::vector<int64_t> Encode(std::string_view text) const = 0;
  // Throws UserError naming the position and value of an id outside the vocabulary.
  virtual std::string Decode(std::span<const int64_t> tokens) const = 0;
  // The beginning- and end-of-sequence ids; -1 when the tokenizer has none.
  virtual int64_t bos_id() const { return -1; }
  virtual int64_t eos_id() const { return -1; }
  // The id that ends every document: the EOS id, or the byte tokenizer's newline. Throws
  // UserError for a tokenizer with neither.
  virtual int64_t end_of_document() const = 0;
  // One line for logs: the kind, where it came from, its vocabulary.
  virtual std::string Describe() const = 0;
};

// A document's tokens, as described above.
std::vector<int64_t> DocumentTokens(const Tokenizer& tokenizer, std::string_view text);
// A prompt's tokens: the BOS id (when there is one), then the text's; for the byte
// tokenizer an empty prompt is a newline (the start of a document).
std::vector<int64_t> PromptTokens(const Tokenizer& tokenizer, std::string_view text);

// "1,2, 3" or "1 2 3" -> {1, 2, 3}. Throws UserError naming `what` unless every item is an
// integer in [0, vocab) and there is at least one.
std::vector<int64_t> ParseTokenIds(const std::string& text, int64_t vocab, std::string_view what);

// Refuses (UserError naming both sizes and `what`) a tokenizer whose ids do not all fit a
// model of `model_vocab` rows. A model may have more rows than its tokenizer has ids (a
// vocabulary padded to a multiple, as Megatron does): accepted.
void CheckTokenizerFits(const Tokenizer& tokenizer, int64_t model_vocab, std::string_view what);

}  // namespace conveyor

#endif  // CONVEYOR_DATA_TOKENIZER_H_
