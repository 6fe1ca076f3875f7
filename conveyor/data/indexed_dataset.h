// Megatron's indexed data set: a tokenized corpus as PREFIX.bin (the tokens) and PREFIX.idx
// (where each sequence starts), the files Megatron-Core's tools/preprocess_data.py writes and
// its GPT data set reads, so that a corpus prepared by either tool trains under both.
//
// PREFIX.idx, little-endian ("MMIDIDX" version 1):
//   bytes 0-8     magic "MMIDIDX\0\0"
//   bytes 9-16    uint64 version, 1
//   byte 17       uint8 token dtype code: 1 uint8, 2 int8, 3 int16, 4 int32, 5 int64,
//                 6 float64, 7 float32, 8 uint16 (conveyor reads the integer ones)
//   bytes 18-25   uint64 S, the number of sequences
//   bytes 26-33   uint64 D, the number of document indices (documents + 1)
//   int32[S]      the sequences' lengths in tokens
//   int64[S]      the sequences' byte offsets in PREFIX.bin
//   int64[D]      document indices: document j is the sequences [doc[j], doc[j + 1]);
//                 doc[0] = 0, doc[D - 1] = S
// PREFIX.bin: the sequences' tokens back to back, in the dtype of the index.
//
// conveyor writes one sequence per document (Megatron does too unless it splits sentences).
//
// Thread-safety: an IndexedDataset is immutable once open (any thread may read it); an
// IndexedDatasetWriter is used by one thread.
#ifndef CONVEYOR_DATA_INDEXED_DATASET_H_
#define CONVEYOR_DATA_INDEXED_DATASET_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "conveyor/data/mapped_file.h"
#include "conveyor/data/token_source.h"

namespace conveyor {

class AtomicFile;

// A token dtype of the index: its code, its size, its name.
struct TokenDtype {
  int code = 0;
  int bytes = 0;
  const char* name = "";
};

// The dtype Megatron picks for a vocabulary: uint16 below 65500 tokens, int32 above.
TokenDtype TokenDtypeFor(int64_t vocab_size);
// uint8 (code 1): what a loss mask's 0 and 1 are stored in (open_token_source.h).
TokenDtype ByteDtype();

// Whether PREFIX.idx and PREFIX.bin both exist: `prefix` names a data set, not a text.
bool IsIndexedDataset(const std::string& prefix);

// A data set opened through memory maps: the index is read once, to check it, and the tokens
// only where asked for; neither stays resident (the pages read are dropped).
class IndexedDataset : public TokenSource {
 public:
  // Opens PREFIX.idx and PREFIX.bin and checks that they agree: magic, version, a known
  // integer dtype, the index's size for its counts, lengths >= 0, every sequence's bytes
  // inside PREFIX.bin, document indices from 0 rising to S. Throws UserError naming the file,
  // the byte or entry and the values otherwise.
  explicit IndexedDataset(const std::string& prefix);
  ~IndexedDataset();
  IndexedDataset(const IndexedDataset&) = delete;
  IndexedDataset& operator=(const IndexedDataset&) = delete;

  const std::string& prefix() const { return prefix_; }
  const std::string& name() const override { return prefix_; }
  std::string Describe() const override;
  TokenDtype dtype() const { return dtype_; }
  int64_t num_sequences() const { return num_sequences_; }
  int64_t num_documents() const override { return num_documents_; }
  int64_t num_tokens() const override { return num_tokens_; }
  // Precondition: 0 <= i < num_sequences().
  int64_t sequence_length(int64_t i) const;
  // The sequences of document j, [first, end). Precondition: 0 <= j < num_documents().
  int64_t document_first(int64_t j) const;
  int64_t document_end(int64_t j) const { return document_first(j + 1); }

  // Tokens [offset, offset + count) of sequence `sequence`, widened to int64, into `out`.
  // Throws UserError naming the sequence when the range is not inside it.
  void Read(int64_t sequence, int64_t offset, int64_t count, int64_t* out) const;
  std::vector<int64_t> Read(int64_t sequence) const;

  // Whether the sequences lie back to back in PREFIX.bin, in order, from its first byte (as
  // conveyor's writer and Megatron's preprocess_data.py store them): then PREFIX.bin is the
  // documents' concatenation, one stream of num_tokens() tokens, read by ReadStream.
  bool contiguous() const { return contiguous_; }
  // Tokens [offset, offset + count) of that stream, widened to int64, into `out`. Throws
  // UserError when the data set is not contiguous or the range is not inside the stream.
  void ReadStream(int64_t offset, int64_t count, int64_t* out) const override;
  // Where document j starts in the stream (num_tokens() for j = num_documents()), and which
  // document holds stream position `offset` (never an empty one).
  // Preconditions: contiguous(); 0 <= j <= num_documents(); 0 <= offset < num_tokens().
  int64_t DocumentOffset(int64_t j) const override;
  int64_t DocumentAt(int64_t offset) const;

  // Throws UserError naming the document and position of the first of `tokens`, read from
  // stream position `offset` on, outside the model's vocabulary [0, vocab_size).
  void CheckTokens(int64_t offset, std::span<const int64_t> tokens,
                   int64_t vocab_size) const override;

 private:
  std::string prefix_;
  std::unique_ptr<MappedFile> index_, data_;
  TokenDtype dtype_;
  int64_t num_sequences_ = 0, num_documents_ = 0, num_tokens_ = 0;
  bool contiguous_ = true;
  // The index's arrays inside index_: int32 lengths (S), int64 pointers (S) and document
  // indices (D). They start at bytes 34, 34 + 4S and 34 + 12S of a page-aligned mapping, so
  // no entry is aligned: each is read with memcpy.
  const char* lengths_ = nullptr;
  const char* pointers_ = nullptr;
  const char* documents_ = nullptr;
};

// Writes a data set as a stream of documents, in constant memory but for 4 bytes per document
// (its length; the index is written at the end): tokens go to disk as they come. Nothing appears
// under PREFIX.bin / PREFIX.idx before Finish(): a writer destroyed without it (an exception, a
// kill) leaves them as they were and removes its temporary files (on a kill, the temporary files of
// AtomicFile may stay; never a half-written file under the final names).
class IndexedDatasetWriter {
 public:
  // Tokens in [0, vocab_size), stored in TokenDtypeFor(vocab_size), or in `dtype` (uint8,
  // uint16 or int32, wide enough for the vocabulary). Throws UserError when the files cannot
  // be created.
  IndexedDatasetWriter(const std::string& prefix, int64_t vocab_size);
  IndexedDatasetWriter(const std::string& prefix, int64_t vocab_size, TokenDtype dtype);
  ~IndexedDatasetWriter();

  // One document of one sequence. Throws UserError naming the document and position of a
  // token outside [0, vocab_size) or a document longer than 2^31 - 1 tokens.
  void AddDocument(std::span<const int64_t> tokens);
  // Writes the index, then makes both files durable under their names (PREFIX.bin first).
  void Finish();

  int64_t documents() const { return static_cast<int64_t>(lengths_.size()); }
  int64_t tokens() const { return tokens_; }

 private:
  void Flush();

  std::string prefix_;
  int64_t vocab_size_;
  TokenDtype dtype_;
  std::unique_ptr<AtomicFile> bin_;
  std::vector<char> buffer_;  // tokens not yet written to bin_
  std::vector<int32_t> lengths_;
  int64_t tokens_ = 0;
  bool finished_ = false;
};

}  // namespace conveyor

#endif  // CONVEYOR_DATA_INDEXED_DATASET_H_
