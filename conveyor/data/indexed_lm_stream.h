// Language-model batches from a tokenized corpus (token_source.h: an indexed data set or a
// flat token file), each a pure function of (seed, step), as Megatron's GPT data set makes
// its samples:
//
// - Split by documents: of the D documents in the data set's order, the first
//   round(D w0 / (w0 + w1 + w2)) train, the next round(D (w0 + w1) / sum) - that many
//   validate, the rest are the test split (Megatron's --split 969,30,1). The split does not
//   depend on the seed.
// - A split's documents, concatenated in order (each ends with its end-of-document token),
//   are one stream of tokens; its samples are the W = (tokens - 1) / T windows of T + 1
//   tokens starting at k T, consecutive windows sharing one token.
// - Training takes the samples epoch by epoch, each epoch in its own seeded order: sample i
//   of step s is global sample g = s N + i, window PermutedIndex(g mod W, n = W,
//   key = (seed, g / W)). No table is built: start-up and memory do not grow with the data
//   set, and a run resumed at step s reads exactly the samples the uninterrupted run would.
// - Evaluation: the validation windows in order.
//
// Batches are made of these windows by BlendedLmStream (blended_lm_stream.h), of one source
// or several.
//
// Every token read is checked against the model's vocabulary; one outside it is refused
// naming its document and position.
//
// What else a window carries: with a loss mask (open_token_source.h: supervised data) which
// of its tokens are targets; with document_mask, each token's position in its document from
// the window's start (WindowPositions, token_windows.h), so that attention stays within a
// document and rotary positions restart at each (Megatron's reset_attention_mask and
// reset_position_ids).
//
// Thread-safety: immutable after construction; Get and GetEval are safe from any thread.
#ifndef CONVEYOR_DATA_INDEXED_LM_STREAM_H_
#define CONVEYOR_DATA_INDEXED_LM_STREAM_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "conveyor/data/token_source.h"

namespace conveyor {

struct IndexedLmStreamOptions {
  int64_t seq_len = 128;   // T
  int64_t batch_size = 8;  // N (BlendedLmStream's)
  int64_t vocab_size = 256;
  uint64_t seed = 0;
  std::array<double, 3> split = {969, 30, 1};  // train, validation, test weights
  bool document_mask = false;                  // windows carry their document positions
};

// A sample: T + 1 tokens of the stream and what the data set says of them.
struct LmWindow {
  std::vector<int64_t> tokens;     // T + 1
  std::vector<int64_t> targets;    // T + 1: 1 where the token is a target; empty: every token is
  std::vector<int64_t> positions;  // T + 1 (WindowPositions); empty without document_mask
};

// "969,30,1" -> {969, 30, 1}. Throws UserError naming the text unless it is three
// non-negative finite numbers with a positive sum.
std::array<double, 3> ParseSplit(const std::string& text);

class IndexedLmStream {
 public:
  // `loss_mask`: the data's (OpenLossMask), or null. Throws UserError for a split whose train
  // part holds fewer than T + 1 tokens, a validation part (of non-zero weight) that does too,
  // bad options, or document_mask on data without documents (a token file).
  IndexedLmStream(std::shared_ptr<const TokenSource> data, IndexedLmStreamOptions options,
                  std::shared_ptr<const TokenSource> loss_mask = nullptr);

  // Global training sample g's window: tokens [TrainWindowStart(g), + T + 1) of the stream,
  // checked against the vocabulary. g >= 0.
  LmWindow TrainWindow(int64_t g) const;
  // The stream position of that window (see above).
  int64_t TrainWindowStart(int64_t g) const;
  // The validation windows, in order: floor((validation tokens - 1) / T), 0 when the
  // validation part is shorter than T + 1 tokens; window i, checked. 0 <= i < EvalWindows().
  int64_t EvalWindows() const;
  LmWindow EvalWindow(int64_t i) const;
  // Counted targets of training sample g: T, or with a loss mask those it marks.
  int64_t TrainTargets(int64_t g) const;

  // Documents and tokens of each split: [train, validation, test].
  const std::array<int64_t, 3>& documents() const { return documents_; }
  const std::array<int64_t, 3>& tokens() const { return tokens_; }
  const IndexedLmStreamOptions& options() const { return options_; }
  const TokenSource& data() const { return *data_; }
  bool has_loss_mask() const { return loss_mask_ != nullptr; }

 private:
  // Tokens [start, start + T + 1) of the data set's stream, checked against the vocabulary.
  LmWindow Window(int64_t start) const;
  std::shared_ptr<const TokenSource> data_, loss_mask_;
  IndexedLmStreamOptions options_;
  std::array<int64_t, 3> documents_{}, tokens_{};
  std::array<int64_t, 3> first_token_{};  // where each split starts in the stream
};

}  // namespace conveyor

#endif  // CONVEYOR_DATA_INDEXED_LM_STREAM_H_
