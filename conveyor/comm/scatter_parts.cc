#include "conveyor/comm/scatter_parts.h"

#include <sstream>

#include "conveyor/common/error.h"

namespace conveyor {
std::string ScatterParts::Format(const std::vector<int64_t>& counts) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < counts.size(); ++i) out << (i > 0 ? ", " : "") << counts[i];
  out << "]";
  return out.str();
}

ScatterParts::ScatterParts(const GroupRanks& ranks, const at::Tensor& input,
                           const std::vector<int64_t>& counts)
    : counts_(counts) {
  const std::string what = ranks.Self() + ": reduce-scatter";
  CONVEYOR_CHECK(input.defined()) << what << " of an undefined tensor";
  CONVEYOR_CHECK(input.dim() == 1)
      << what << " of a tensor of shape " << input.sizes() << ": the input must be 1-D";
  CONVEYOR_CHECK(static_cast<int>(counts.size()) == ranks.size())
      << what << " with counts " << Format(counts) << ": " << counts.size()
      << " counts for a group of " << ranks.size() << " ranks (one per rank)";
  int64_t sum = 0;
  for (int64_t count : counts) {
    CONVEYOR_CHECK(count >= 0) << what << " with counts " << Format(counts)
                               << ": a count is negative";
    begins_.push_back(sum);
    sum += count;
  }
  CONVEYOR_CHECK(sum == input.numel())
      << what << " with counts " << Format(counts) << ": they sum to " << sum
      << " but the input has " << input.numel() << " elements";
}

}  // namespace conveyor
