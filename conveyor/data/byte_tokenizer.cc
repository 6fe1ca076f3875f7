#include "conveyor/data/byte_tokenizer.h"

#include <cstdio>

#include "conveyor/common/error.h"

namespace conveyor {
namespace {

// Length of the well-formed UTF-8 sequence starting at bytes[i], or 0 when it is not one
// (overlong forms, surrogates and code points above U+10FFFF are rejected).
size_t Utf8SequenceLength(std::string_view bytes, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(bytes[k]); };
  const unsigned char lead = byte(i);
  size_t length;
  unsigned char low = 0x80, high = 0xBF;  // allowed range of the second byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) low = 0xA0;
    if (lead == 0xED) high = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) low = 0x90;
    if (lead == 0xF4) high = 0x8F;
  } else {
    return 0;
  }
  if (i + length > bytes.size()) return 0;
  if (byte(i + 1) < low || byte(i + 1) > high) return 0;
  for (size_t k = 2; k < length; ++k) {
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  }
  return length;
}

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
