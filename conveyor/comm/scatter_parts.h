// ScatterParts: the parts of one reduce-scatter (Transport::ReduceScatterSum), for the
// implementations of Transport: the argument checks every backend makes, and where each
// rank's part lies in the input.
//
// Value type; immutable; thread-safe.
#ifndef CONVEYOR_COMM_SCATTER_PARTS_H_
#define CONVEYOR_COMM_SCATTER_PARTS_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "conveyor/comm/group_ranks.h"

namespace conveyor {

class ScatterParts {
 public:
  // Checks the preconditions of Transport::ReduceScatterSum on this rank of `ranks`: throws
  // UserError naming this rank and the offending values unless `input` is a defined 1-D
  // tensor, `counts` has one count per rank of the group, none negative, and they sum to
  // input.numel().
  ScatterParts(const GroupRanks& ranks, const at::Tensor& input,
               const std::vector<int64_t>& counts);

  int size() const { return static_cast<int>(counts_.size()); }
  // Rank r's part: elements [begin(r), begin(r) + count(r)) of the input.
  int64_t begin(int r) const { return begins_.at(r); }
  int64_t count(int r) const { return counts_.at(r); }
  // Rank r's part of the 1-D tensor `flat` (a view).
  at::Tensor Of(const at::Tensor& flat, int r) const { return flat.narrow(0, begin(r), count(r)); }

  const std::vector<int64_t>& counts() const { return counts_; }

  // "[1, 0, 2]": counts as error messages show them.
  static std::string Format(const std::vector<int64_t>& counts);

 private:
  std::vector<int64_t> counts_;
  std::vector<int64_t> begins_;
};

}  // namespace conveyor

#endif  // CONVEYOR_COMM_SCATTER_PARTS_H_
