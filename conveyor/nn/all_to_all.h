// All-to-all with a gradient: the exchange that carries tokens to the ranks holding their
// experts and back (expert parallelism), inside a model's forward and backward.
//
// ExchangeRows(x, groups, send_counts, recv_counts) is group->AllToAll(x, send_counts,
// recv_counts) (comm/transport.h: rows of x along dimension 0, this rank's counts), on the
// group of the calling thread's lane (comm/overlap_lane.h); its backward is the reverse
// exchange of the gradient, the counts swapped, on the group of the lane the backward runs
// in, so each row's gradient returns to the rank that sent the row.
//
// Thread-safety and ordering: the exchanges are collectives on `group`, in forward and in
// backward, so every rank of the group must run the same forwards and backwards in the same
// order (as for tensor_parallel.h's operators); the group must outlive the autograd graph.
#ifndef CONVEYOR_NN_ALL_TO_ALL_H_
#define CONVEYOR_NN_ALL_TO_ALL_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "conveyor/comm/overlap_lane.h"

namespace conveyor {

// x (sum of send_counts, ...) -> (sum of recv_counts, ...), a new tensor. groups.lane0 must
// not be null (a group of one rank returns a copy of x).
at::Tensor ExchangeRows(const at::Tensor& x, const LaneGroups& groups,
                        const std::vector<int64_t>& send_counts,
                        const std::vector<int64_t>& recv_counts);

}  // namespace conveyor

#endif  // CONVEYOR_NN_ALL_TO_ALL_H_
