#include "conveyor/data/indexed_lm_stream.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <sstream>
#include <utility>
#include <vector>

#include "conveyor/common/error.h"
#include "conveyor/data/batch_builder.h"
#include "conveyor/data/open_token_source.h"
#include "conveyor/data/stateless_random.h"
#include "conveyor/data/token_windows.h"

namespace conveyor {
namespace {

constexpr uint64_t kEpochSalt = 0x6964782d65706f63ULL;  // "idx-epoc"

}  // namespace

std::array<double, 3> ParseSplit(const std::string& text) {
  std::array<double, 3> split{};
  std::istringstream in(text);
  std::string part;
  int parts = 0;
  bool ok = true;
  while (std::getline(in, part, ',')) {
    size_t used = 0;
    double value = -1;
    try {
      value = std::stod(part, &used);
    } catch (const std::exception&) {
      ok = false;
    }
    ok = ok && used == part.size() && parts < 3 && std::isfinite(value) && value >= 0;
    if (ok) split[parts] = value;
    ++parts;
  }
  CONVEYOR_CHECK(ok && parts == 3 && split[0] + split[1] + split[2] > 0)
      << "--split '" << text
      << "' must be three weights for train, validation and test, such as 969,30,1 "
         "(non-negative, not all 0)";
  return split;
}

IndexedLmStream::IndexedLmStream(std::shared_ptr<const TokenSource> data,
                                 IndexedLmStreamOptions options,
                                 std::shared_ptr<const TokenSource> loss_mask)
    : data_(std::move(data)), loss_mask_(std::move(loss_mask)), options_(options) {
  CheckStreamOptions(options_.batch_size, options_.seq_len, 0);
  if (options_.document_mask) CheckDocumentsToMask(*data_);
  const auto& w = options_.split;
  const double sum = w[0] + w[1] + w[2];
  const int64_t d = data_->num_documents();
  const auto boundary = [&](double share) {
    return std::clamp<int64_t>(std::llround(static_cast<double>(d) * share / sum), 0, d);
  };
  const std::array<int64_t, 4> first = {0, boundary(w[0]), boundary(w[0] + w[1]), d};
  for (int s = 0; s < 3; ++s) {
    documents_[s] = first[s + 1] - first[s];
    first_token_[s] = data_->DocumentOffset(first[s]);
    tokens_[s] = data_->DocumentOffset(first[s + 1]) - first_token_[s];
  }
  CONVEYOR_CHECK(tokens_[0] > options_.seq_len)
      << data_->name() << ": the train split (" << documents_[0] << " of " << d
      << " documents) holds " << tokens_[0]
      << " tokens, fewer than seq_len + 1 = " << options_.seq_len + 1;
  CONVEYOR_CHECK(w[1] == 0 || tokens_[1] > options_.seq_len)
      << data_->name() << ": the validation split (" << documents_[1] << " of " << d
      << " documents) holds " << tokens_[1]
      << " tokens, fewer than seq_len + 1 = " << options_.seq_len + 1
      << "; give it more weight in --split, or 0 to evaluate nothing";
}

LmWindow IndexedLmStream::Window(int64_t start) const {
  const int64_t length = options_.seq_len + 1;
  LmWindow window;
  window.tokens.resize(length);
  data_->ReadStream(start, length, window.tokens.data());
  data_->CheckTokens(start, window.tokens, options_.vocab_size);
  if (loss_mask_) {
    window.targets.resize(length);
    ReadLossMask(*loss_mask_, start, length, window.targets.data());
  }
  if (options_.document_mask) {
    window.positions.resize(length);
    WindowPositions(*data_, start, length, window.positions.data());
  }
  return window;
}

int64_t IndexedLmStream::TrainTargets(int64_t g) const {
  if (!loss_mask_) return options_.seq_len;
  std::vector<int64_t> mask(options_.seq_len + 1);
  ReadLossMask(*loss_mask_, TrainWindowStart(g), options_.seq_len + 1, mask.data());
  return std::accumulate(mask.begin() + 1, mask.end(), int64_t{0});
}

int64_t IndexedLmStream::TrainWindowStart(int64_t g) const {
  const int64_t t = options_.seq_len;
  const auto windows = static_cast<uint64_t>((tokens_[0] - 1) / t);
  const auto global = static_cast<uint64_t>(g);
  const uint64_t epoch = global / windows;
  const uint64_t k =
      PermutedIndex(global % windows, windows, HashOf({options_.seed, kEpochSalt, epoch}));
  return first_token_[0] + static_cast<int64_t>(k) * t;
}

LmWindow IndexedLmStream::TrainWindow(int64_t g) const {
  CONVEYOR_CHECK(g >= 0) << "training sample " << g << " must be >= 0";
  return Window(TrainWindowStart(g));
}

int64_t IndexedLmStream::EvalWindows() const {
  return tokens_[1] > options_.seq_len ? (tokens_[1] - 1) / options_.seq_len : 0;
}

LmWindow IndexedLmStream::EvalWindow(int64_t i) const {
  CONVEYOR_CHECK(i >= 0 && i < EvalWindows())
      << "validation window " << i << " is outside [0, " << EvalWindows() << ")";
  return Window(first_token_[1] + i * options_.seq_len);
}

}  // namespace conveyor
