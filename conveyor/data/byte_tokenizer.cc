#include "conveyor/data/byte_tokenizer.h"

#include <cstdio>

#include "conveyor/common/error.h"
#include "conveyor/common/text.h"

namespace conveyor {
namespace {

void AppendEscaped(unsigned char byte, std::string* out) {
  char buffer[5];
  std::snprintf(buffer, sizeof(buffer), "\\x%02X", byte);
  out->append(buffer);
}

}  // namespace

std::vector<int64_t> ByteTokenizer::Encode(std::string_view text) const {
  std::vector<int64_t> tokens;
  tokens.reserve(text.size());
  for (char byte : text) tokens.push_back(Token(byte));
  return tokens;
}

std::string ByteTokenizer::Decode(std::span<const int64_t> tokens) const {
  std::string bytes;
  bytes.reserve(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    CONVEYOR_CHECK(tokens[i] >= 0 && tokens[i] < kVocabSize)
        << "token " << tokens[i] << " at position " << i << " is outside the byte vocabulary [0, "
        << kVocabSize << ")";
    bytes.push_back(static_cast<char>(tokens[i]));
  }
  return bytes;
}

std::string ByteTokenizer::Printable(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (size_t i = 0; i < bytes.size();) {
    const auto byte = static_cast<unsigned char>(bytes[i]);
    if (byte < 0x80) {
      const bool control = (byte < 0x20 && byte != '\n' && byte != '\t') || byte == 0x7F;
      if (control) {
        AppendEscaped(byte, &out);
      } else {
        out.push_back(bytes[i]);
      }
      ++i;
    } else if (const size_t length = Utf8SequenceLength(bytes, i); length > 0) {
      out.append(bytes.substr(i, length));
      i += length;
    } else {
      AppendEscaped(byte, &out);
      ++i;
    }
  }
  return out;
}

}  // namespace conveyor
