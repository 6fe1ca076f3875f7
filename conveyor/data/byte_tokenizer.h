// Byte-level tokenizer: token id = byte value, vocabulary 256, no special tokens (the
// language-model stream separates documents with ordinary bytes instead). Any byte string
// round-trips exactly, including invalid UTF-8.
//
// Thread-safety: stateless; every method is safe from any thread.
#ifndef CONVEYOR_DATA_BYTE_TOKENIZER_H_
#define CONVEYOR_DATA_BYTE_TOKENIZER_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "conveyor/data/tokenizer.h"

namespace conveyor {

class ByteTokenizer : public Tokenizer {
 public:
  static constexpr int64_t kVocabSize = 256;

  // The token of one byte.
  static constexpr int64_t Token(char byte) { return static_cast<unsigned char>(byte); }

  int64_t vocab_size() const override { return kVocabSize; }

  // One token per byte.
  std::vector<int64_t> Encode(std::string_view text) const override;

  // The bytes of the tokens (not necessarily valid UTF-8). Throws UserError naming the
  // position and value of a token outside [0, 256).
  std::string Decode(std::span<const int64_t> tokens) const override;

  // A newline: documents are separated as lines of text are.
  int64_t end_of_document() const override { return Token('\n'); }
  std::string Describe() const override { return "bytes (256 ids)"; }

  // `bytes` made safe to print: valid UTF-8 sequences, '\n' and '\t' are kept; other
  // control bytes and bytes of invalid or truncated sequences become "\xNN".
  static std::string Printable(std::string_view bytes);
};

}  // namespace conveyor

#endif  // CONVEYOR_DATA_BYTE_TOKENIZER_H_
