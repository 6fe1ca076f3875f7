#include "conveyor/data/indexed_dataset.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>
#include <sstream>

#include "conveyor/common/atomic_file.h"
#include "conveyor/common/error.h"
#include "conveyor/data/mapped_file.h"

namespace conveyor {

static_assert(std::endian::native == std::endian::little, "the files are little-endian");

namespace {

constexpr char kMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', '\0', '\0'};
constexpr uint64_t kVersion = 1;
constexpr int64_t kHeaderBytes = 9 + 8 + 1 + 8 + 8;
constexpr size_t kBufferBytes = 1 << 20;
// Index entries checked between releases of the index's pages: the check never holds more
// than about a megabyte of it resident.
constexpr int64_t kReleaseEvery = 1 << 16;
// A read of more bytes than this asks for its pages ahead (the mapping reads no further ahead
// by itself: MADV_RANDOM).
constexpr int64_t kLargeRead = 1 << 20;

constexpr TokenDtype kDtypes[] = {{1, 1, "uint8"},   {2, 1, "int8"},  {3, 2, "int16"},
                                  {4, 4, "int32"},   {5, 8, "int64"}, {6, 8, "float64"},
                                  {7, 4, "float32"}, {8, 2, "uint16"}};

template <typename T>
T Load(const char* at) {
  T value;
  std::memcpy(&value, at, sizeof(T));
  return value;
}

// Token k of a run of tokens of `dtype`, widened.
int64_t TokenAt(const char* tokens, int code, int64_t k) {
  switch (code) {
    case 1:
      return Load<uint8_t>(tokens + k);
    case 2:
      return Load<int8_t>(tokens + k);
    case 3:
      return Load<int16_t>(tokens + 2 * k);
    case 4:
      return Load<int32_t>(tokens + 4 * k);
    case 5:
      return Load<int64_t>(tokens + 8 * k);
    default:
      return Load<uint16_t>(tokens + 2 * k);
  }
}

}  // namespace

bool IsIndexedDataset(const std::string& prefix) {
  struct stat st {};
  return stat((prefix + ".idx").c_str(), &st) == 0 && stat((prefix + ".bin").c_str(), &st) == 0;
}

TokenDtype TokenDtypeFor(int64_t vocab_size) {
  return vocab_size < 65500 ? kDtypes[7] : kDtypes[3];
}

TokenDtype ByteDtype() { return kDtypes[0]; }

IndexedDataset::IndexedDataset(const std::string& prefix) : prefix_(prefix) {
  index_ = std::make_unique<MappedFile>(prefix + ".idx");
  data_ = std::make_unique<MappedFile>(prefix + ".bin");
  const std::string& idx = index_->path();
  const char* at = index_->bytes();
  CONVEYOR_CHECK(index_->size() >= kHeaderBytes)
      << idx << " is truncated: " << index_->size() << " bytes, its header alone takes "
      << kHeaderBytes;
  CONVEYOR_CHECK(std::memcmp(at, kMagic, sizeof kMagic) == 0)
      << idx << " is not a Megatron indexed data set: it does not start with MMIDIDX";
  const uint64_t version = Load<uint64_t>(at + 9);
  CONVEYOR_CHECK(version == kVersion)
      << idx << ": version " << version << " at byte 9; conveyor reads version 1";
  const int code = Load<uint8_t>(at + 17);
  CONVEYOR_CHECK(code >= 1 && code <= 8)
      << idx << ": unknown dtype code " << code << " at byte 17 (1 to 8 are Megatron's)";
  dtype_ = kDtypes[code - 1];
  CONVEYOR_CHECK(code != 6 && code != 7)
      << idx << ": dtype code " << code << " (" << dtype_.name << ") at byte 17 holds no token ids";
  const uint64_t sequences = Load<uint64_t>(at + 18), indices = Load<uint64_t>(at + 26);
  // Sizes in 128 bits: absurd counts must not wrap around to a plausible size.
  const unsigned __int128 expected = static_cast<unsigned __int128>(kHeaderBytes) +
                                     static_cast<unsigned __int128>(sequences) * 12 +
                                     static_cast<unsigned __int128>(indices) * 8;
  CONVEYOR_CHECK(expected == static_cast<unsigned __int128>(index_->size()))
      << idx << " holds " << index_->size() << " bytes; its header (" << sequences << " sequences, "
      << indices << " document indices) needs "
      << (expected > static_cast<unsigned __int128>(std::numeric_limits<int64_t>::max())
              ? std::string("more than 2^63")
              : std::to_string(static_cast<int64_t>(expected)))
      << (expected > static_cast<unsigned __int128>(index_->size()) ? " (truncated)" : "");
  CONVEYOR_CHECK(indices >= 1) << idx << ": no document indices (at least the leading 0)";
  num_sequences_ = static_cast<int64_t>(sequences);
  num_documents_ = static_cast<int64_t>(indices) - 1;
  lengths_ = at + kHeaderBytes;
  pointers_ = lengths_ + 4 * num_sequences_;
  documents_ = pointers_ + 8 * num_sequences_;
  const std::string& bin = data_->path();
  for (int64_t i = 0; i < num_sequences_; ++i) {
    const int64_t length = sequence_length(i);
    const int64_t begin = Load<int64_t>(pointers_ + 8 * i);
    CONVEYOR_CHECK(length >= 0) << idx << ": sequence " << i << " has length " << length;
    // length x bytes < 2^34: only `begin`, any int64, must not take part in a sum.
    const int64_t bytes = length * dtype_.bytes;
    CONVEYOR_CHECK(begin >= 0 && begin % dtype_.bytes == 0 && begin <= data_->size() &&
                   bytes <= data_->size() - begin)
        << idx << ": sequence " << i << " takes " << bytes << " bytes from byte " << begin << " of "
        << bin << ", which has " << data_->size()
        << (begin % dtype_.bytes != 0 ? " (and is not aligned to its tokens)" : "");
    contiguous_ = contiguous_ && begin == num_tokens_ * dtype_.bytes;
    num_tokens_ += length;
    if (i % kReleaseEvery == kReleaseEvery - 1) index_->Release();
  }
  int64_t previous = 0;
  for (int64_t j = 0; j <= num_documents_; ++j) {
    const int64_t first = document_first(j);
    CONVEYOR_CHECK(first >= previous && first <= num_sequences_ && (j > 0 || first == 0))
        << idx << ": document index " << j << " is " << first << " (after " << previous
        << "); they rise from 0 to the " << num_sequences_ << " sequences";
    previous = first;
    if (j % kReleaseEvery == kReleaseEvery - 1) index_->Release();
  }
  CONVEYOR_CHECK(previous == num_sequences_)
      << idx << ": the last document index is " << previous << ", not the " << num_sequences_
      << " sequences: sequences past it belong to no document";
  index_->Release();  // resident memory must not grow with the data set
  data_->Advise(MADV_RANDOM);
}

IndexedDataset::~IndexedDataset() = default;

std::string IndexedDataset::Describe() const {
  std::ostringstream out;
  out << "data set " << prefix_ << ": " << num_documents_ << " documents, " << num_tokens_
      << " tokens (" << dtype_.name << ")";
  return out.str();
}

int64_t IndexedDataset::sequence_length(int64_t i) const {
  CONVEYOR_ASSERT(i >= 0 && i < num_sequences_) << "sequence " << i << " of " << num_sequences_;
  return Load<int32_t>(lengths_ + 4 * i);
}

int64_t IndexedDataset::document_first(int64_t j) const {
  CONVEYOR_ASSERT(j >= 0 && j <= num_documents_) << "document " << j << " of " << num_documents_;
  return Load<int64_t>(documents_ + 8 * j);
}

void IndexedDataset::Read(int64_t sequence, int64_t offset, int64_t count, int64_t* out) const {
  CONVEYOR_CHECK(sequence >= 0 && sequence < num_sequences_ && offset >= 0 && count >= 0 &&
                 offset + count <= sequence_length(sequence))
      << prefix_ << ": tokens [" << offset << ", " << offset + count << ") of sequence " << sequence
      << " are not inside it (" << num_sequences_ << " sequences)";
  const char* tokens =
      data_->bytes() + Load<int64_t>(pointers_ + 8 * sequence) + offset * dtype_.bytes;
  for (int64_t k = 0; k < count; ++k) out[k] = TokenAt(tokens, dtype_.code, k);
}

void IndexedDataset::ReadStream(int64_t offset, int64_t count, int64_t* out) const {
  CONVEYOR_CHECK(contiguous_)
      << prefix_ << ": its sequences are not stored back to back in " << data_->path()
      << "; conveyor reads samples from data sets whose .bin is their concatenation (as "
         "preprocess_data.py and conveyor data prepare write them)";
  CONVEYOR_CHECK(offset >= 0 && count >= 0 && offset + count <= num_tokens_)
      << prefix_ << ": tokens [" << offset << ", " << offset + count << ") are not inside its "
      << num_tokens_;
  const int64_t begin = offset * dtype_.bytes, end = (offset + count) * dtype_.bytes;
  if (end - begin > kLargeRead) data_->Advise(MADV_WILLNEED, begin, end);
  const char* tokens = data_->bytes() + begin;
  for (int64_t k = 0; k < count; ++k) out[k] = TokenAt(tokens, dtype_.code, k);
  data_->Release(begin, end);
}

int64_t IndexedDataset::DocumentOffset(int64_t j) const {
  const int64_t first = document_first(j);
  if (first == num_sequences_) return num_tokens_;
  return Load<int64_t>(pointers_ + 8 * first) / dtype_.bytes;
}

int64_t IndexedDataset::DocumentAt(int64_t offset) const {
  CONVEYOR_ASSERT(offset >= 0 && offset < num_tokens_) << "offset " << offset;
  // The last document starting at or before `offset`.
  int64_t low = 0, high = num_documents_ - 1;
  while (low < high) {
    const int64_t middle = (low + high + 1) / 2;
    if (DocumentOffset(middle) <= offset) {
      low = middle;
    } else {
      high = middle - 1;
    }
  }
  return low;
}

void IndexedDataset::CheckTokens(int64_t offset, std::span<const int64_t> tokens,
                                 int64_t vocab_size) const {
  for (size_t k = 0; k < tokens.size(); ++k) {
    if (tokens[k] >= 0 && tokens[k] < vocab_size) continue;
    const int64_t at = offset + static_cast<int64_t>(k), document = DocumentAt(at);
    CONVEYOR_CHECK(false) << prefix_ << ": document " << document << ", token "
                          << at - DocumentOffset(document) << " is " << tokens[k]
                          << ", outside the model's vocabulary [0, " << vocab_size << ")";
  }
}

std::vector<int64_t> IndexedDataset::Read(int64_t sequence) const {
  std::vector<int64_t> tokens(sequence_length(sequence));
  Read(sequence, 0, static_cast<int64_t>(tokens.size()), tokens.data());
  return tokens;
}

IndexedDatasetWriter::IndexedDatasetWriter(const std::string& prefix, int64_t vocab_size)
    : IndexedDatasetWriter(prefix, vocab_size, TokenDtypeFor(vocab_size)) {}

IndexedDatasetWriter::IndexedDatasetWriter(const std::string& prefix, int64_t vocab_size,
                                           TokenDtype dtype)
    : prefix_(prefix),
      vocab_size_(vocab_size),
      dtype_(dtype),
      bin_(std::make_unique<AtomicFile>(prefix + ".bin")) {
  CONVEYOR_CHECK(vocab_size >= 1 && vocab_size <= std::numeric_limits<int32_t>::max())
      << "a vocabulary of " << vocab_size << " tokens cannot be stored";
  CONVEYOR_ASSERT((dtype.code == 1 && vocab_size <= 256) ||
                  (dtype.code == 8 && vocab_size <= 65536) || dtype.code == 4)
      << "tokens of a vocabulary of " << vocab_size << " in " << dtype.name;
  buffer_.reserve(kBufferBytes);
}

IndexedDatasetWriter::~IndexedDatasetWriter() = default;

void IndexedDatasetWriter::AddDocument(std::span<const int64_t> tokens) {
  CONVEYOR_ASSERT(!finished_) << "a document after Finish";
  CONVEYOR_CHECK(tokens.size() <= static_cast<size_t>(std::numeric_limits<int32_t>::max()))
      << prefix_ << ": document " << documents() << " has " << tokens.size()
      << " tokens, more than an index entry holds (2^31 - 1)";
  for (size_t k = 0; k < tokens.size(); ++k) {
    const int64_t t = tokens[k];
    CONVEYOR_CHECK(t >= 0 && t < vocab_size_)
        << prefix_ << ": document " << documents() << ", token " << k << " is " << t
        << ", outside the vocabulary [0, " << vocab_size_ << ")";
    if (dtype_.bytes == 1) {
      buffer_.push_back(static_cast<char>(static_cast<uint8_t>(t)));
    } else if (dtype_.bytes == 2) {
      const uint16_t v = static_cast<uint16_t>(t);
      buffer_.insert(buffer_.end(), reinterpret_cast<const char*>(&v),
                     reinterpret_cast<const char*>(&v) + 2);
    } else {
      const int32_t v = static_cast<int32_t>(t);
      buffer_.insert(buffer_.end(), reinterpret_cast<const char*>(&v),
                     reinterpret_cast<const char*>(&v) + 4);
    }
    if (buffer_.size() >= kBufferBytes) Flush();
  }
  lengths_.push_back(static_cast<int32_t>(tokens.size()));
  tokens_ += static_cast<int64_t>(tokens.size());
}

void IndexedDatasetWriter::Flush() {
  bin_->Write(buffer_.data(), buffer_.size());
  buffer_.clear();
}

void IndexedDatasetWriter::Finish() {
  CONVEYOR_ASSERT(!finished_) << "Finish twice";
  finished_ = true;
  Flush();
  const uint64_t sequences = lengths_.size(), indices = lengths_.size() + 1;
  std::string index(kMagic, sizeof kMagic);
  auto put = [&index](const auto& value) {
    index.append(reinterpret_cast<const char*>(&value), sizeof value);
  };
  put(kVersion);
  put(static_cast<uint8_t>(dtype_.code));
  put(sequences);
  put(indices);
  index.append(reinterpret_cast<const char*>(lengths_.data()), 4 * lengths_.size());
  int64_t pointer = 0;
  for (int32_t length : lengths_) {
    put(pointer);
    pointer += static_cast<int64_t>(length) * dtype_.bytes;
  }
  for (int64_t j = 0; j <= static_cast<int64_t>(sequences); ++j) put(j);
  bin_->Commit();
  WriteFileAtomically(prefix_ + ".idx", index);
}

}  // namespace conveyor
