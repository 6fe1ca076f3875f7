// A tokenized corpus read as one stream: its documents' tokens back to back, each document
// ending with its end-of-document token. What language-model samples are cut from
// (indexed_lm_stream.h). Two kinds of file:
//
//   Megatron's indexed data set, PREFIX.bin + PREFIX.idx (indexed_dataset.h): documents as
//     the index says.
//   A flat token file (flat_token_file.h): llm.c's .bin shards and nanoGPT's raw uint16 .bin.
//     Such a file has no document index; it is cut into kFlatParts equal parts that stand for
//     documents (so --split divides it by tokens, to a thousandth).
//
// Thread-safety: implementations are immutable after construction; every method is safe
// from any thread.
#ifndef CONVEYOR_DATA_TOKEN_SOURCE_H_
#define CONVEYOR_DATA_TOKEN_SOURCE_H_

#include <cstdint>
#include <span>
#include <string>

namespace conveyor {

class TokenSource {
 public:
  virtual ~TokenSource() = default;

  // The path it was opened from (a data set's PREFIX), for messages.
  virtual const std::string& name() const = 0;
  // One line: the kind, documents, tokens and their dtype.
  virtual std::string Describe() const = 0;
  virtual int64_t num_documents() const = 0;
  // Whether its documents are the corpus's own (an indexed data set's), not equal parts
  // standing for them (a flat token file's): what document masks need.
  virtual bool has_documents() const { return true; }
  virtual int64_t num_tokens() const = 0;
  // Where document j starts in the stream; num_tokens() for j = num_documents().
  // Precondition: 0 <= j <= num_documents().
  virtual int64_t DocumentOffset(int64_t j) const = 0;
  // Tokens [offset, offset + count) of the stream, widened to int64, into `out`. Throws
  // UserError when the range is not inside the stream.
  virtual void ReadStream(int64_t offset, int64_t count, int64_t* out) const = 0;
  // Throws UserError naming the document and position of the first of `tokens`, read from
  // stream position `offset` on, outside the model's vocabulary [0, vocab_size).
  virtual void CheckTokens(int64_t offset, std::span<const int64_t> tokens,
                           int64_t vocab_size) const = 0;
};

}  // namespace conveyor

#endif  // CONVEYOR_DATA_TOKEN_SOURCE_H_
