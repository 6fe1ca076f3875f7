// Language-model batches over a corpus, byte-level (ByteTokenizer).
//
// The corpus is cut into pieces (a document, or kPieceBytes-long parts of a longer one, so
// that a single large text file can still be split). Pieces are ranked by a hash of (seed,
// document, part) and held out in that order until at least held_out_fraction of the bytes
// are held out, always leaving one piece for training. Each side joins its pieces in corpus
// order, with `separator` between them (but not between consecutive parts of a document).
//
// Train batch `step`: N windows of T + 1 bytes, window i starting at a position drawn from
// (seed, step, i) alone, so the batch is the same on every rank, for every pipeline
// configuration, and after a resume that knows only the step. inputs = window[:-1],
// targets = window[1:]. Eval batches tile the held-out text with consecutive windows; the
// last batch is completed with padding rows (batch_builder.h).
//
// Thread-safety: immutable after construction; Get and GetEval are safe from any thread.
#ifndef CONVEYOR_DATA_LM_STREAM_H_
#define CONVEYOR_DATA_LM_STREAM_H_

#include <cstdint>
#include <string>

#include "conveyor/data/corpus.h"
#include "conveyor/module/microbatch.h"

namespace conveyor {

struct LmStreamOptions {
  int64_t seq_len = 128;            // T
  int64_t batch_size = 8;           // N
  double held_out_fraction = 0.05;  // in [0, 1)
  uint64_t seed = 0;
  std::string separator = "\n%\n";  // the fortune files' own separator
};

class LmStream {
 public:
  static constexpr int64_t kPieceBytes = 4096;

  // Copies what it needs of the corpus. Throws UserError for a bad option
  // (CheckStreamOptions) or a train part shorter than T + 1 bytes.
  LmStream(const Corpus& corpus, LmStreamOptions options);

  // Train batch: inputs, targets (N, T) int64, attention_mask (N, T) all true. Step >= 0.
  Batch Get(int64_t step) const;

  // ceil(held-out windows / N); 0 when the held-out text is shorter than T + 1 bytes.
  int64_t EvalBatches() const;
  // Held-out batch `index` in [0, EvalBatches()): windows index * N ... (index + 1) * N - 1.
  Batch GetEval(int64_t index) const;

  const LmStreamOptions& options() const { return options_; }
  const std::string& train_text() const { return train_; }
  const std::string& held_out_text() const { return held_out_; }

 private:
  int64_t EvalWindows() const;

  LmStreamOptions options_;
  std::string train_;
  std::string held_out_;
};

}  // namespace conveyor

#endif  // CONVEYOR_DATA_LM_STREAM_H_
