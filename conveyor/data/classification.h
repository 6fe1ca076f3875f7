// Text classification over a corpus: "which category (fortune file) does a text come
// from?", byte-level (ByteTokenizer).
//
// The K categories with the most documents become classes (ties broken by name), labelled
// 0 .. K-1 from the largest down; documents of other categories are dropped. Each document
// is held out when a hash of (seed, its corpus index) falls below held_out_fraction, so its
// side depends neither on K nor on the other documents.
//
// An example is the document's first T bytes (padded with input 0 and mask false when
// shorter); its target is the label, one per row. Train batch `step`: N examples drawn from
// (seed, step, i) alone (same on every rank and after a resume). Eval batches cover the
// held-out split once, in corpus order; the last one is completed with padding rows
// (batch_builder.h).
//
// Thread-safety: immutable after construction; Get and GetEval are safe from any thread.
#ifndef CONVEYOR_DATA_CLASSIFICATION_H_
#define CONVEYOR_DATA_CLASSIFICATION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "conveyor/data/corpus.h"
#include "conveyor/module/microbatch.h"

namespace conveyor {

struct ClassificationOptions {
  int num_classes = 4;              // K
  int64_t seq_len = 128;            // T
  int64_t batch_size = 16;          // N
  double held_out_fraction = 0.15;  // in [0, 1)
  uint64_t seed = 0;
};

class ClassificationTask {
 public:
  // Copies what it needs of the corpus. Throws UserError for a bad option
  // (CheckStreamOptions), K < 2, K above the corpus's category count, or an empty train or
  // held-out split.
  ClassificationTask(const Corpus& corpus, ClassificationOptions options);

  // Train batch: inputs (N, T) int64, targets (N,) int64 labels, attention_mask (N, T).
  Batch Get(int64_t step) const;

  // ceil(held-out examples / N).
  int64_t EvalBatches() const;
  // Held-out batch `index` in [0, EvalBatches()): held-out examples index * N onwards.
  Batch GetEval(int64_t index) const;

  // Share of the held-out split in its most common class: the accuracy of always guessing
  // that class, which a trained classifier must beat.
  double MajorityRate() const;

  const ClassificationOptions& options() const { return options_; }
  // Label -> category name.
  const std::vector<std::string>& class_names() const { return class_names_; }
  int64_t train_size() const { return static_cast<int64_t>(train_.size()); }
  int64_t held_out_size() const { return static_cast<int64_t>(held_out_.size()); }
  // Corpus indices of the held-out examples, ascending.
  const std::vector<int64_t>& held_out_documents() const { return held_out_documents_; }

 private:
  struct Example {
    std::string text;  // at most T bytes
    int64_t label;
  };

  ClassificationOptions options_;
  std::vector<std::string> class_names_;
  std::vector<Example> train_;
  std::vector<Example> held_out_;
  std::vector<int64_t> held_out_documents_;
};

}  // namespace conveyor

#endif  // CONVEYOR_DATA_CLASSIFICATION_H_
