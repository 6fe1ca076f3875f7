#include "conveyor/data/token_windows.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>

#include "conveyor/common/error.h"
#include "conveyor/data/open_token_source.h"

namespace conveyor {

at::Tensor CorpusByteStream(const Corpus& corpus) {
  int64_t n = 0;
  for (const Document& d : corpus.documents) n += static_cast<int64_t>(d.text.size()) + 1;
  at::Tensor bytes = at::empty({std::max<int64_t>(n - 1, 0)}, at::kByte);
  uint8_t* out = bytes.data_ptr<uint8_t>();
  for (size_t i = 0; i < corpus.documents.size(); ++i) {
    const std::string& text = corpus.documents[i].text;
    if (i > 0) *out++ = '\n';
    std::memcpy(out, text.data(), text.size());
    out += text.size();
  }
  return bytes.to(at::kLong);
}

at::Tensor DataSetStream(const TokenSource& data, int64_t vocab_size) {
  at::Tensor tokens = at::empty({data.num_tokens()}, at::kLong);
  data.ReadStream(0, data.num_tokens(), tokens.data_ptr<int64_t>());
  data.CheckTokens(0, {tokens.data_ptr<int64_t>(), static_cast<size_t>(data.num_tokens())},
                   vocab_size);
  return tokens;
}

at::Tensor LossMaskStream(const TokenSource& mask) {
  at::Tensor entries = at::empty({mask.num_tokens()}, at::kLong);
  ReadLossMask(mask, 0, mask.num_tokens(), entries.data_ptr<int64_t>());
  return entries;
}

void CheckDocumentsToMask(const TokenSource& data) {
  CONVEYOR_CHECK(data.has_documents())
      << data.name() << " is a token file without a document index: --document-mask needs a "
      << "data set (PREFIX.bin and PREFIX.idx) whose index says where each document starts";
}

void WindowPositions(const TokenSource& data, int64_t start, int64_t count, int64_t* out) {
  // j: the first document starting after `start` (documents [0, D], offsets rising).
  int64_t low = 0, high = data.num_documents();
  while (low < high) {
    const int64_t mid = low + (high - low) / 2;
    if (data.DocumentOffset(mid) <= start) {
      low = mid + 1;
    } else {
      high = mid;
    }
  }
  int64_t j = low, position = 0;
  for (int64_t k = 0; k < count; ++k) {
    if (j <= data.num_documents() && data.DocumentOffset(j) == start + k) {
      position = 0;
      while (j <= data.num_documents() && data.DocumentOffset(j) == start + k) ++j;
    }
    out[k] = position++;
  }
}

std::vector<Batch> NextTokenWindows(const at::Tensor& tokens, int64_t seq_len, int64_t batch_size,
                                    const StreamMasks& masks) {
  CONVEYOR_CHECK(tokens.dim() == 1 && tokens.size(0) >= 2)
      << "evaluation needs a stream of at least 2 tokens, got " << tokens.sizes();
  CONVEYOR_CHECK(seq_len >= 1 && batch_size >= 1)
      << "windows of " << seq_len << " tokens, " << batch_size << " a batch: both must be >= 1";
  const at::Tensor t = tokens.to(at::kLong).contiguous();
  const int64_t n = t.size(0);
  const int64_t windows = (n - 1 + seq_len - 1) / seq_len;  // k with kT + 1 < N
  std::vector<Batch> batches;
  for (int64_t first = 0; first < windows; first += batch_size) {
    const int64_t count = std::min(batch_size, windows - first);
    Batch b;
    b.inputs = at::zeros({count, seq_len}, at::kLong);
    b.targets = at::full({count, seq_len}, -1, at::kLong);
    // Rows start as 0 .. T-1: padding past the stream's end keeps those (the real tokens
    // before it never attend to it, and its targets count nothing).
    if (masks.documents != nullptr) b.positions = at::arange(seq_len).repeat({count, 1});
    for (int64_t i = 0; i < count; ++i) {
      const int64_t start = (first + i) * seq_len;
      const int64_t length = std::min(seq_len, n - 1 - start);  // targets in this window
      b.inputs[i].narrow(0, 0, length).copy_(t.narrow(0, start, length));
      at::Tensor targets = t.narrow(0, start + 1, length);
      if (masks.targets.defined()) {
        targets = targets.masked_fill(masks.targets.narrow(0, start + 1, length) == 0, -1);
      }
      b.targets[i].narrow(0, 0, length).copy_(targets);
      if (masks.documents != nullptr) {
        WindowPositions(*masks.documents, start, length, b.positions[i].data_ptr<int64_t>());
      }
    }
    batches.push_back(std::move(b));
  }
  return batches;
}

}  // namespace conveyor
