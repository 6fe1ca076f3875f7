// ScatterParts: the parts of one reduce-scatter (Transport::ReduceScatterSum) or one side of
// an all-to-all (Transport::AllToAll), for the implementations of Transport: the argument
// checks every backend makes, and where each rank's part lies along dimension 0.
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

  // Checks one side of Transport::AllToAll on this rank of `ranks` (`side`: "send" or
  // "receive"): throws UserError naming this rank and the offending values unless `counts`
  // has one count per rank, none negative, and (when `rows` >= 0) they sum to `rows`.
  static ScatterParts AllToAllSide(const GroupRanks& ranks, const std::vector<int64_t>& counts,
                                   int64_t rows, const char* side);
  // Every precondition of Transport::AllToAll on this rank (UserError naming this rank and the
  // values): `input` defined with rows (dimension 0), both sides as AllToAllSide checks them.
  // Returns the receive side.
  static ScatterParts AllToAllReceived(const GroupRanks& ranks, const at::Tensor& input,
                                       const std::vector<int64_t>& send_counts,
                                       const std::vector<int64_t>& recv_counts);

  int size() const { return static_cast<int>(counts_.size()); }
  // Rank r's part: elements (rows) [begin(r), begin(r) + count(r)) along dimension 0.
  int64_t begin(int r) const { return begins_.at(r); }
  int64_t count(int r) const { return counts_.at(r); }
  int64_t total() const { return total_; }
  // Rank r's part of `t` along dimension 0 (a view).
  at::Tensor Of(const at::Tensor& t, int r) const { return t.narrow(0, begin(r), count(r)); }

  const std::vector<int64_t>& counts() const { return counts_; }

  // "[1, 0, 2]": counts as error messages show them.
  static std::string Format(const std::vector<int64_t>& counts);

 private:
  // Checks `counts` for the operation `what`: one a rank, none negative.
  ScatterParts(const GroupRanks& ranks, const std::string& what,
               const std::vector<int64_t>& counts);

  std::vector<int64_t> counts_;
  std::vector<int64_t> begins_;
  int64_t total_ = 0;
};

}  // namespace conveyor

#endif  // CONVEYOR_COMM_SCATTER_PARTS_H_
