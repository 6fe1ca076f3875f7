// Language-model batches from one tokenized corpus or several blended by weight
// (`--data 0.7 A 0.3 B`), as Megatron's BlendedDataset mixes them: each source's samples are
// its own (indexed_lm_stream.h: its split, its epochs, its seeded order), and global sample
// g of the blend is sample g_k of source k.
//
// Which source: within every period of P = kBlendPeriod samples, slot s goes to the source
// whose count so far falls furthest below its share (weight x (s + 1) - count, the first
// source on ties), Megatron's greedy rule; period p repeats the slots of period 0. With n_k
// slots of source k in a period, g = p P + s is sample g_k = p n_k + (rank of s among
// source k's slots). A function of g alone: no table grows with the run, a resumed run
// reads the very samples of the uninterrupted one. One source takes every sample (g_k = g).
//
// Batches: training batch `step` holds global samples [step N, step N + N); a replica reads
// only its rows (GetRows). Evaluation blends the sources' validation windows by the same
// rule, in order, until one source (of validation windows) runs out; N a batch, the last
// padded with rows that count nothing (batch_builder.h).
//
// Thread-safety: immutable after construction; every method is safe from any thread.
#ifndef CONVEYOR_DATA_BLENDED_LM_STREAM_H_
#define CONVEYOR_DATA_BLENDED_LM_STREAM_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "conveyor/data/indexed_lm_stream.h"
#include "conveyor/data/token_source.h"
#include "conveyor/module/microbatch.h"

namespace conveyor {

inline constexpr int64_t kBlendPeriod = 1000;

// `--data`'s text as (weight, path) pairs: "PATH" alone is weight 1; "W1 PATH1 W2 PATH2 ..."
// blends. Throws UserError naming the text for a weight that is not a finite number >= 0,
// weights summing to 0 or to more than a double holds (1e308 A 1e308 B), a weight without a
// path, or a path given twice.
std::vector<std::pair<double, std::string>> ParseDataBlend(const std::string& text);

// Whether `text` names token sources (IsTokenSource of every path of ParseDataBlend): a run
// reads it as tokens, not as text.
bool IsTokenData(const std::string& text);

class BlendedLmStream {
 public:
  // Opens every path of `text` (ParseDataBlend, OpenTokenSource, and its OpenLossMask), each
  // with `options`.
  // Throws UserError as those do, naming the source.
  BlendedLmStream(const std::string& text, IndexedLmStreamOptions options);

  // Training batch `step`: inputs, targets (N, T) int64, attention_mask (N, T) all true.
  Batch Get(int64_t step) const { return GetRows(step, 0, options_.batch_size); }
  // Rows [begin, end) of it (a data-parallel replica's share): only those are read.
  Batch GetRows(int64_t step, int64_t begin, int64_t end) const;
  // The counted targets of training batch `step`: N T, or, where loss masks say, fewer (only
  // the masks are read).
  int64_t BatchTargets(int64_t step) const;
  int64_t EvalBatches() const;
  Batch GetEval(int64_t index) const;

  // Global sample g's source and its sample index there.
  std::pair<int, int64_t> Locate(int64_t g) const;

  const IndexedLmStreamOptions& options() const { return options_; }
  const std::vector<IndexedLmStream>& sources() const { return sources_; }
  const std::vector<double>& weights() const { return weights_; }  // normalized
  // Lines for the run's start: each source, its weight, its split.
  std::string Describe() const;

 private:
  IndexedLmStreamOptions options_;
  std::vector<IndexedLmStream> sources_;
  std::vector<double> weights_;
  std::vector<int> slot_source_;               // P entries
  std::vector<int64_t> slot_rank_;             // P entries: the slot's rank among its source's
  std::vector<int64_t> per_period_;            // n_k
  std::vector<std::pair<int, int64_t>> eval_;  // (source, validation window), in order
};

}  // namespace conveyor

#endif  // CONVEYOR_DATA_BLENDED_LM_STREAM_H_
