// A flat token file: tokens back to back, no document index (token_source.h).
//
//   llm.c (Karpathy's llm.c, dev/data/data_common.py): a header of 256 little-endian int32,
//     header[0] = 20240520 (its magic), header[1] = 1 (uint16 tokens, GPT-2) or 2 (uint32,
//     Llama 3), header[2] = the token count; then the tokens. Every document starts with the
//     end-of-text token.
//   nanoGPT (data/*/prepare.py): raw uint16 tokens, no header; every document ends with the
//     end-of-text token. A .bin whose first int32 is not llm.c's magic is read so.
//
// The file is memory-mapped and never read whole; its kFlatParts equal parts of tokens stand
// for documents (the last parts may be one token longer).
//
// Thread-safety: immutable after construction; every method is safe from any thread.
#ifndef CONVEYOR_DATA_FLAT_TOKEN_FILE_H_
#define CONVEYOR_DATA_FLAT_TOKEN_FILE_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "conveyor/data/mapped_file.h"
#include "conveyor/data/token_source.h"

namespace conveyor {

inline constexpr int64_t kFlatParts = 1000;
inline constexpr int32_t kLlmcMagic = 20240520;

class FlatTokenFile : public TokenSource {
 public:
  // Throws UserError naming the file for: a file that cannot be mapped; an llm.c header that
  // is truncated, of an unknown version, or whose count disagrees with the file's size; a
  // nanoGPT file of an odd size; no tokens.
  explicit FlatTokenFile(const std::string& path);

  const std::string& name() const override { return file_.path(); }
  std::string Describe() const override;
  int64_t num_documents() const override { return std::min(kFlatParts, num_tokens_); }
  bool has_documents() const override { return false; }
  int64_t num_tokens() const override { return num_tokens_; }
  int64_t DocumentOffset(int64_t j) const override;
  void ReadStream(int64_t offset, int64_t count, int64_t* out) const override;
  void CheckTokens(int64_t offset, std::span<const int64_t> tokens,
                   int64_t vocab_size) const override;

  bool llmc() const { return header_bytes_ > 0; }
  int token_bytes() const { return token_bytes_; }

 private:
  MappedFile file_;
  int64_t header_bytes_ = 0;  // 1024 for llm.c, 0 for nanoGPT
  int token_bytes_ = 2;
  int64_t num_tokens_ = 0;
};

}  // namespace conveyor

#endif  // CONVEYOR_DATA_FLAT_TOKEN_FILE_H_
