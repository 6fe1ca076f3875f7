#include "conveyor/data/classification.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "conveyor/common/error.h"
#include "conveyor/data/batch_builder.h"
#include "conveyor/data/stateless_random.h"

namespace conveyor {
namespace {

constexpr uint64_t kSplitSalt = 0x636c2d73706c6974ULL;   // "cl-split"
constexpr uint64_t kSampleSalt = 0x636c2d73616d706cULL;  // "cl-sampl"

// label_of[category]: its label, or -1 when the category is dropped.
std::vector<int64_t> LabelLargest(const Corpus& corpus, int k) {
  const std::vector<int64_t> sizes = corpus.DocumentsPerCategory();
  std::vector<int> order(sizes.size());
  std::iota(order.begin(), order.end(), 0);
  // Categories are sorted by name, so a stable sort breaks ties by name.
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return sizes[a] > sizes[b]; });
  std::vector<int64_t> label_of(sizes.size(), -1);
  for (int label = 0; label < k; ++label) label_of[order[label]] = label;
  return label_of;
}

}  // namespace

ClassificationTask::ClassificationTask(const Corpus& corpus, ClassificationOptions options)
    : options_(options) {
  CheckStreamOptions(options_.batch_size, options_.seq_len, options_.held_out_fraction);
  const int k = options_.num_classes;
  CONVEYOR_CHECK(k >= 2) << "num_classes must be at least 2, got " << k;
  CONVEYOR_CHECK(k <= static_cast<int>(corpus.categories.size()))
      << "num_classes " << k << " exceeds the " << corpus.categories.size() << " categories of "
      << corpus.source;
  const std::vector<int64_t> label_of = LabelLargest(corpus, k);
  class_names_.resize(k);
  for (size_t c = 0; c < label_of.size(); ++c) {
    if (label_of[c] >= 0) class_names_[label_of[c]] = corpus.categories[c];
  }
  for (size_t d = 0; d < corpus.documents.size(); ++d) {
    const Document& doc = corpus.documents[d];
    const int64_t label = label_of[doc.category];
    if (label < 0) continue;
    Example example{doc.text.substr(0, options_.seq_len), label};
    if (UniformUnit(HashOf({options_.seed, kSplitSalt, d})) < options_.held_out_fraction) {
      held_out_.push_back(std::move(example));
      held_out_documents_.push_back(static_cast<int64_t>(d));
    } else {
      train_.push_back(std::move(example));
    }
  }
  CONVEYOR_CHECK(!train_.empty() && !held_out_.empty())
      << "classifying " << corpus.source << " into " << k << " classes with held_out_fraction "
      << options_.held_out_fraction << " leaves " << train_.size() << " train and "
      << held_out_.size() << " held-out examples; both must be non-empty";
}

Batch ClassificationTask::Get(int64_t step) const {
  CONVEYOR_CHECK(step >= 0) << "step must be >= 0, got " << step;
  BatchBuilder builder(options_.batch_size, options_.seq_len, BatchBuilder::Targets::kPerRow);
  for (int64_t i = 0; i < options_.batch_size; ++i) {
    const uint64_t hash =
        HashOf({options_.seed, kSampleSalt, static_cast<uint64_t>(step), static_cast<uint64_t>(i)});
    const Example& example = train_[UniformIndex(hash, train_.size())];
    builder.SetExample(i, example.text, example.label);
  }
  return std::move(builder).Build();
}

int64_t ClassificationTask::EvalBatches() const {
  return (held_out_size() + options_.batch_size - 1) / options_.batch_size;
}

Batch ClassificationTask::GetEval(int64_t index) const {
  CONVEYOR_CHECK(index >= 0 && index < EvalBatches())
      << "eval batch " << index << " is outside [0, " << EvalBatches() << ")";
  const int64_t n = options_.batch_size;
  BatchBuilder builder(n, options_.seq_len, BatchBuilder::Targets::kPerRow);
  for (int64_t i = 0; i < n && index * n + i < held_out_size(); ++i) {
    const Example& example = held_out_[index * n + i];
    builder.SetExample(i, example.text, example.label);
  }
  return std::move(builder).Build();
}

double ClassificationTask::MajorityRate() const {
  std::vector<int64_t> counts(class_names_.size(), 0);
  for (const Example& example : held_out_) ++counts[example.label];
  return static_cast<double>(*std::max_element(counts.begin(), counts.end())) / held_out_size();
}

}  // namespace conveyor
