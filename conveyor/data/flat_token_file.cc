#include "conveyor/data/flat_token_file.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <sstream>

#include "conveyor/common/error.h"

namespace conveyor {
namespace {

constexpr int64_t kLlmcHeaderBytes = 256 * 4;
constexpr int64_t kLargeRead = 1 << 20;  // a read past this asks for its pages ahead

int32_t Int32At(const char* at) {
  int32_t value;
  std::memcpy(&value, at, sizeof value);
  return value;
}

}  // namespace

FlatTokenFile::FlatTokenFile(const std::string& path) : file_(path) {
  const int64_t size = file_.size();
  if (size >= 4 && Int32At(file_.bytes()) == kLlmcMagic) {
    CONVEYOR_CHECK(size >= kLlmcHeaderBytes)
        << path << " is truncated: " << size << " bytes, llm.c's header alone takes "
        << kLlmcHeaderBytes;
    const int32_t version = Int32At(file_.bytes() + 4);
    CONVEYOR_CHECK(version == 1 || version == 2)
        << path << ": llm.c version " << version
        << " at byte 4; conveyor reads 1 (uint16 tokens) and 2 (uint32)";
    header_bytes_ = kLlmcHeaderBytes;
    token_bytes_ = version == 1 ? 2 : 4;
    const int64_t count = Int32At(file_.bytes() + 8);
    const int64_t held = (size - header_bytes_) / token_bytes_;
    CONVEYOR_CHECK(count >= 0 && count == held && (size - header_bytes_) % token_bytes_ == 0)
        << path << ": its llm.c header counts " << count << " tokens at byte 8, the file holds "
        << size - header_bytes_ << " bytes of " << token_bytes_ << "-byte tokens after it"
        << (count > held ? " (truncated)" : "");
    num_tokens_ = count;
  } else {
    CONVEYOR_CHECK(size % 2 == 0) << path << ": " << size
                                  << " bytes, not a whole number of nanoGPT's uint16 tokens (and "
                                     "not llm.c's, whose files start with 20240520)";
    num_tokens_ = size / 2;
  }
  CONVEYOR_CHECK(num_tokens_ > 0) << path << " holds no tokens";
  file_.Advise(MADV_RANDOM);
}

std::string FlatTokenFile::Describe() const {
  std::ostringstream out;
  out << (llmc() ? "llm.c" : "nanoGPT") << " token file " << name() << ": " << num_tokens_
      << " tokens (" << (token_bytes_ == 2 ? "uint16" : "uint32")
      << ", no documents: " << num_documents() << " equal parts)";
  return out.str();
}

int64_t FlatTokenFile::DocumentOffset(int64_t j) const {
  CONVEYOR_ASSERT(j >= 0 && j <= num_documents()) << "part " << j << " of " << num_documents();
  // floor(j N / parts) without overflow for any N < 2^62 and parts <= 1000.
  const int64_t parts = num_documents();
  return num_tokens_ / parts * j + num_tokens_ % parts * j / parts;
}

void FlatTokenFile::ReadStream(int64_t offset, int64_t count, int64_t* out) const {
  CONVEYOR_CHECK(offset >= 0 && count >= 0 && offset <= num_tokens_ &&
                 count <= num_tokens_ - offset)
      << name() << ": tokens [" << offset << ", " << offset + count << ") are not inside its "
      << num_tokens_;
  const int64_t begin = header_bytes_ + offset * token_bytes_;
  const int64_t end = begin + count * token_bytes_;
  if (end - begin > kLargeRead) file_.Advise(MADV_WILLNEED, begin, end);
  const char* at = file_.bytes() + begin;
  for (int64_t k = 0; k < count; ++k) {
    if (token_bytes_ == 2) {
      uint16_t token;
      std::memcpy(&token, at + 2 * k, 2);
      out[k] = token;
    } else {
      uint32_t token;
      std::memcpy(&token, at + 4 * k, 4);
      out[k] = token;
    }
  }
  file_.Release(begin, end);
}

void FlatTokenFile::CheckTokens(int64_t offset, std::span<const int64_t> tokens,
                                int64_t vocab_size) const {
  for (size_t k = 0; k < tokens.size(); ++k) {
    CONVEYOR_CHECK(tokens[k] >= 0 && tokens[k] < vocab_size)
        << name() << ": token " << offset + static_cast<int64_t>(k) << " (byte "
        << header_bytes_ + (offset + static_cast<int64_t>(k)) * token_bytes_ << ") is " << tokens[k]
        << ", outside the model's vocabulary [0, " << vocab_size << ")";
  }
}

}  // namespace conveyor
