#include "conveyor/data/lm_stream.h"

#include <algorithm>
#include <numeric>
#include <utility>
#include <vector>

#include "conveyor/common/error.h"
#include "conveyor/data/batch_builder.h"
#include "conveyor/data/stateless_random.h"

namespace conveyor {
namespace {

constexpr uint64_t kSplitSalt = 0x6c6d2d73706c6974ULL;   // "lm-split"
constexpr uint64_t kSampleSalt = 0x6c6d2d73616d706cULL;  // "lm-sampl"

struct Piece {
  size_t document;
  size_t part;
  std::string_view text;
};

std::vector<Piece> CutPieces(const Corpus& corpus) {
  std::vector<Piece> pieces;
  for (size_t d = 0; d < corpus.documents.size(); ++d) {
    const std::string_view text = corpus.documents[d].text;
    for (size_t begin = 0, part = 0; begin < text.size(); begin += LmStream::kPieceBytes, ++part) {
      pieces.push_back({d, part, text.substr(begin, LmStream::kPieceBytes)});
    }
  }
  return pieces;
}

// held[i]: piece i is held out.
std::vector<bool> ChooseHeldOut(const std::vector<Piece>& pieces, double fraction, uint64_t seed) {
  std::vector<uint64_t> rank(pieces.size());
  int64_t total = 0;
  for (size_t i = 0; i < pieces.size(); ++i) {
    rank[i] = HashOf({seed, kSplitSalt, pieces[i].document, pieces[i].part});
    total += static_cast<int64_t>(pieces[i].text.size());
  }
  std::vector<size_t> order(pieces.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return rank[a] != rank[b] ? rank[a] < rank[b] : a < b; });
  std::vector<bool> held(pieces.size(), false);
  int64_t held_bytes = 0;
  for (size_t k = 0; k + 1 < order.size() && held_bytes < fraction * total; ++k) {
    held[order[k]] = true;
    held_bytes += static_cast<int64_t>(pieces[order[k]].text.size());
  }
  return held;
}

}  // namespace

LmStream::LmStream(const Corpus& corpus, LmStreamOptions options) : options_(std::move(options)) {
  CheckStreamOptions(options_.batch_size, options_.seq_len, options_.held_out_fraction);
  const std::vector<Piece> pieces = CutPieces(corpus);
  const std::vector<bool> held = ChooseHeldOut(pieces, options_.held_out_fraction, options_.seed);
  const Piece* last[2] = {nullptr, nullptr};  // the last piece appended to each side
  for (size_t i = 0; i < pieces.size(); ++i) {
    const Piece& piece = pieces[i];
    std::string& side = held[i] ? held_out_ : train_;
    const Piece*& previous = last[held[i] ? 1 : 0];
    const bool continues = previous != nullptr && previous->document == piece.document &&
                           previous->part + 1 == piece.part;
    if (previous != nullptr && !continues) side += options_.separator;
    side += piece.text;
    previous = &piece;
  }
  CONVEYOR_CHECK(static_cast<int64_t>(train_.size()) > options_.seq_len)
      << "the train part of " << corpus.source << " has " << train_.size()
      << " bytes, fewer than seq_len + 1 = " << options_.seq_len + 1;
}

Batch LmStream::Get(int64_t step) const {
  CONVEYOR_CHECK(step >= 0) << "step must be >= 0, got " << step;
  const int64_t t = options_.seq_len;
  const uint64_t starts = train_.size() - t;  // windows [s, s + T] with s < starts
  BatchBuilder builder(options_.batch_size, t, BatchBuilder::Targets::kPerToken);
  for (int64_t i = 0; i < options_.batch_size; ++i) {
    const uint64_t hash =
        HashOf({options_.seed, kSampleSalt, static_cast<uint64_t>(step), static_cast<uint64_t>(i)});
    builder.SetWindow(i, std::string_view(train_).substr(UniformIndex(hash, starts), t + 1));
  }
  return std::move(builder).Build();
}

int64_t LmStream::EvalWindows() const {
  const auto size = static_cast<int64_t>(held_out_.size());
  return size > options_.seq_len ? (size - 1) / options_.seq_len : 0;
}

int64_t LmStream::EvalBatches() const {
  return (EvalWindows() + options_.batch_size - 1) / options_.batch_size;
}

Batch LmStream::GetEval(int64_t index) const {
  CONVEYOR_CHECK(index >= 0 && index < EvalBatches())
      << "eval batch " << index << " is outside [0, " << EvalBatches() << ")";
  const int64_t t = options_.seq_len, n = options_.batch_size;
  BatchBuilder builder(n, t, BatchBuilder::Targets::kPerToken);
  for (int64_t i = 0; i < n && index * n + i < EvalWindows(); ++i) {
    builder.SetWindow(i, std::string_view(held_out_).substr((index * n + i) * t, t + 1));
  }
  return std::move(builder).Build();
}

}  // namespace conveyor
