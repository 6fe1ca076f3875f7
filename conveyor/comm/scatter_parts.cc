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

ScatterParts::ScatterParts(const GroupRanks& ranks, const std::string& what,
                           const std::vector<int64_t>& counts)
    : counts_(counts) {
  CONVEYOR_CHECK(static_cast<int>(counts.size()) == ranks.size())
      << what << " " << Format(counts) << ": " << counts.size() << " counts for a group of "
      << ranks.size() << " ranks (one per rank)";
  for (int64_t count : counts) {
    CONVEYOR_CHECK(count >= 0) << what << " " << Format(counts) << ": a count is negative";
    begins_.push_back(total_);
    total_ += count;
  }
}

ScatterParts::ScatterParts(const GroupRanks& ranks, const at::Tensor& input,
                           const std::vector<int64_t>& counts)
    : ScatterParts(ranks, ranks.Self() + ": reduce-scatter with counts", counts) {
  const std::string what = ranks.Self() + ": reduce-scatter";
  CONVEYOR_CHECK(input.defined()) << what << " of an undefined tensor";
  CONVEYOR_CHECK(input.dim() == 1)
      << what << " of a tensor of shape " << input.sizes() << ": the input must be 1-D";
  CONVEYOR_CHECK(total_ == input.numel())
      << what << " with counts " << Format(counts) << ": they sum to " << total_
      << " but the input has " << input.numel() << " elements";
}

ScatterParts ScatterParts::AllToAllSide(const GroupRanks& ranks, const std::vector<int64_t>& counts,
                                        int64_t rows, const char* side) {
  const std::string what = ranks.Self() + ": all-to-all with " + side + " counts";
  ScatterParts parts(ranks, what, counts);
  CONVEYOR_CHECK(rows < 0 || parts.total_ == rows)
      << what << " " << Format(counts) << ": they sum to " << parts.total_ << " but the input has "
      << rows << " rows";
  return parts;
}

ScatterParts ScatterParts::AllToAllReceived(const GroupRanks& ranks, const at::Tensor& input,
                                            const std::vector<int64_t>& send_counts,
                                            const std::vector<int64_t>& recv_counts) {
  CONVEYOR_CHECK(input.defined() && input.dim() >= 1)
      << ranks.Self() << ": all-to-all of "
      << (input.defined() ? "a 0-dimensional" : "an undefined")
      << " tensor: it needs rows (dimension 0)";
  AllToAllSide(ranks, send_counts, input.size(0), "send");
  return AllToAllSide(ranks, recv_counts, -1, "receive");
}

}  // namespace conveyor
