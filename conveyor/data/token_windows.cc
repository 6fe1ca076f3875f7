#include "conveyor/data/token_windows.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>

#include "conveyor/common/error.h"

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

std::vector<Batch> NextTokenWindows(const at::Tensor& tokens, int64_t seq_len, int64_t batch_size) {
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
    for (int64_t i = 0; i < count; ++i) {
      const int64_t start = (first + i) * seq_len;
      const int64_t length = std::min(seq_len, n - 1 - start);  // targets in this window
      b.inputs[i].narrow(0, 0, length).copy_(t.narrow(0, start, length));
      b.targets[i].narrow(0, 0, length).copy_(t.narrow(0, start + 1, length));
    }
    batches.push_back(std::move(b));
  }
  return batches;
}

}  // namespace conveyor
