#include "conveyor/data/blended_lm_stream.h"

#include <cmath>
#include <set>
#include <sstream>

#include "conveyor/common/error.h"
#include "conveyor/data/batch_builder.h"
#include "conveyor/data/open_token_source.h"

namespace conveyor {
namespace {

// Most validation windows an evaluation list holds (it is made at start-up).
constexpr int64_t kMaxEvalWindows = int64_t{1} << 22;

// The greedy rule: the source whose count falls furthest below weight x (slot + 1).
int NextSource(const std::vector<double>& weights, const std::vector<int64_t>& counts, int64_t slot,
               const std::vector<bool>& allowed) {
  int best = -1;
  double best_error = 0;
  for (size_t k = 0; k < weights.size(); ++k) {
    if (!allowed[k]) continue;
    const double error =
        weights[k] * static_cast<double>(slot + 1) - static_cast<double>(counts[k]);
    if (best < 0 || error > best_error) {
      best = static_cast<int>(k);
      best_error = error;
    }
  }
  return best;
}

}  // namespace

std::vector<std::pair<double, std::string>> ParseDataBlend(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> words;
  for (std::string word; in >> word;) words.push_back(word);
  CONVEYOR_CHECK(!words.empty()) << "--data is empty";
  if (words.size() == 1) return {{1.0, words[0]}};
  CONVEYOR_CHECK(words.size() % 2 == 0)
      << "--data '" << text << "': a blend is weights and paths in pairs (0.7 A 0.3 B); "
      << words.size() << " words";
  std::vector<std::pair<double, std::string>> parts;
  std::set<std::string> seen;
  double sum = 0;
  for (size_t i = 0; i < words.size(); i += 2) {
    size_t used = 0;
    double weight = -1;
    try {
      weight = std::stod(words[i], &used);
    } catch (const std::exception&) {
      used = 0;
    }
    CONVEYOR_CHECK(used == words[i].size() && std::isfinite(weight) && weight >= 0)
        << "--data '" << text << "': weight '" << words[i] << "' of " << words[i + 1]
        << " is not a finite number >= 0";
    CONVEYOR_CHECK(seen.insert(words[i + 1]).second)
        << "--data '" << text << "': " << words[i + 1] << " is given twice";
    sum += weight;
    parts.emplace_back(weight, words[i + 1]);
  }
  CONVEYOR_CHECK(sum > 0) << "--data '" << text << "': the weights sum to 0";
  CONVEYOR_CHECK(std::isfinite(sum))
      << "--data '" << text << "': the weights sum past the largest number (" << sum
      << "), so each would count as 0; give them on a smaller scale (0.7 A 0.3 B)";
  return parts;
}

bool IsTokenData(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> words;
  for (std::string word; in >> word;) words.push_back(word);
  if (words.size() == 1) return IsTokenSource(words[0]);
  return words.size() >= 2 && IsTokenSource(words[1]);
}

BlendedLmStream::BlendedLmStream(const std::string& text, IndexedLmStreamOptions options)
    : options_(options) {
  double sum = 0;
  for (const auto& [weight, path] : ParseDataBlend(text)) {
    std::shared_ptr<const TokenSource> data = OpenTokenSource(path);
    std::shared_ptr<const TokenSource> loss_mask = OpenLossMask(path, *data);
    sources_.emplace_back(std::move(data), options, std::move(loss_mask));
    weights_.push_back(weight);
    sum += weight;
  }
  for (double& w : weights_) w /= sum;
  const int k = static_cast<int>(sources_.size());
  const int64_t period = k == 1 ? 1 : kBlendPeriod;
  std::vector<int64_t> counts(k, 0);
  std::vector<bool> every(k, true);
  for (int64_t s = 0; s < period; ++s) {
    const int source = NextSource(weights_, counts, s, every);
    slot_source_.push_back(source);
    slot_rank_.push_back(counts[source]++);
  }
  per_period_ = counts;
  // Evaluation: the sources that have validation windows, blended until one runs out.
  std::vector<bool> evaluated(k);
  bool any = false;
  for (int i = 0; i < k; ++i) {
    evaluated[i] = weights_[i] > 0 && sources_[i].EvalWindows() > 0;
    any = any || evaluated[i];
  }
  std::fill(counts.begin(), counts.end(), 0);
  for (int64_t j = 0; any && j < kMaxEvalWindows; ++j) {
    const int source = NextSource(weights_, counts, j, evaluated);
    if (counts[source] == sources_[source].EvalWindows()) break;
    eval_.emplace_back(source, counts[source]++);
  }
}

std::pair<int, int64_t> BlendedLmStream::Locate(int64_t g) const {
  CONVEYOR_ASSERT(g >= 0) << "sample " << g;
  const int64_t period = static_cast<int64_t>(slot_source_.size());
  const int64_t p = g / period, s = g % period;
  const int source = slot_source_[s];
  return {source, p * per_period_[source] + slot_rank_[s]};
}

Batch BlendedLmStream::GetRows(int64_t step, int64_t begin, int64_t end) const {
  CONVEYOR_CHECK(step >= 0) << "step must be >= 0, got " << step;
  const int64_t n = options_.batch_size;
  CONVEYOR_CHECK(begin >= 0 && begin < end && end <= n)
      << "rows [" << begin << ", " << end << ") of a batch of " << n;
  BatchBuilder builder(end - begin, options_.seq_len, BatchBuilder::Targets::kPerToken);
  for (int64_t i = begin; i < end; ++i) {
    const auto [source, sample] = Locate(step * n + i);
    const LmWindow window = sources_[source].TrainWindow(sample);
    builder.SetTokenWindow(i - begin, window.tokens, window.targets, window.positions);
  }
  return std::move(builder).Build();
}

int64_t BlendedLmStream::BatchTargets(int64_t step) const {
  const int64_t n = options_.batch_size;
  bool masked = false;
  for (const IndexedLmStream& source : sources_) masked = masked || source.has_loss_mask();
  if (!masked) return n * options_.seq_len;
  int64_t targets = 0;
  for (int64_t i = 0; i < n; ++i) {
    const auto [source, sample] = Locate(step * n + i);
    targets += sources_[source].TrainTargets(sample);
  }
  return targets;
}

int64_t BlendedLmStream::EvalBatches() const {
  const int64_t windows = static_cast<int64_t>(eval_.size());
  return (windows + options_.batch_size - 1) / options_.batch_size;
}

Batch BlendedLmStream::GetEval(int64_t index) const {
  CONVEYOR_CHECK(index >= 0 && index < EvalBatches())
      << "eval batch " << index << " is outside [0, " << EvalBatches() << ")";
  const int64_t n = options_.batch_size, windows = static_cast<int64_t>(eval_.size());
  BatchBuilder builder(n, options_.seq_len, BatchBuilder::Targets::kPerToken);
  for (int64_t i = 0; i < n && index * n + i < windows; ++i) {
    const auto [source, window] = eval_[index * n + i];
    const LmWindow sample = sources_[source].EvalWindow(window);
    builder.SetTokenWindow(i, sample.tokens, sample.targets, sample.positions);
  }
  return std::move(builder).Build();
}

std::string BlendedLmStream::Describe() const {
  std::ostringstream out;
  for (size_t k = 0; k < sources_.size(); ++k) {
    const IndexedLmStream& s = sources_[k];
    const auto& d = s.documents();
    const auto& t = s.tokens();
    out << (k > 0 ? "\n  " : "") << s.data().Describe();
    if (sources_.size() > 1) out << ", weight " << weights_[k];
    out << "; by documents " << d[0] << " / " << d[1] << " / " << d[2]
        << " train / validation / test, " << t[0] << " / " << t[1] << " / " << t[2] << " tokens";
    if (s.has_loss_mask()) out << "; targets by its loss mask " << LossMaskPrefix(s.data().name());
  }
  if (options_.document_mask) out << "; documents kept apart (--document-mask)";
  return out.str();
}

}  // namespace conveyor
