// The token dispatcher of expert parallelism (as Megatron-Core's all-to-all dispatcher): a
// rank's token copies, sorted by expert, travel to the ranks holding their experts
// (DispatchToExperts: an all-to-all of the counts, then one of the rows, with variable
// splits), the experts compute, and the outputs travel back to the copies' places
// (CombineFromExperts). Two halves, so that whatever runs between them (the experts, or
// another micro-batch's compute) is the caller's to schedule.
//
// Rank r of ep.size holds experts [r L, (r + 1) L), L = experts / ep.size. The rows a rank's
// experts receive come expert by expert, and for each expert source rank by source rank, in
// each source's order: what every rank computes does not depend on message timing.
//
// Both halves differentiate (nn/all_to_all.h: each row's gradient returns to the rank that
// sent the row). Collective over the group of the calling thread's lane (ep.groups(),
// comm/overlap_lane.h), in forward and backward: every rank of the group dispatches and
// combines the same number of times in the same order in each lane. With ep.size 1 nothing
// is sent.
#ifndef CONVEYOR_NN_EXPERT_DISPATCH_H_
#define CONVEYOR_NN_EXPERT_DISPATCH_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "conveyor/nn/parallel_context.h"

namespace conveyor {

// What this rank's experts received, and what CombineFromExperts needs to send it back.
struct ExpertRows {
  at::Tensor rows;                  // (R, C): its experts' rows, expert by expert
  std::vector<int64_t> per_expert;  // (L): rows of each of its experts, in order
  // With ep.size > 1: row i of `rows` is row order[i] as received (by source rank, then
  // expert), and the rows this rank sent to / received from each rank.
  at::Tensor order;
  std::vector<int64_t> sent, received;
};

// sorted (M, C): this rank's token copies sorted by global expert; counts (E) int64: how many
// for each of the `experts` experts (on any device). Precondition: ep.size divides experts.
ExpertRows DispatchToExperts(const at::Tensor& sorted, const at::Tensor& counts, int experts,
                             const ExpertParallel& ep);

// out (R, C): the experts' outputs for dispatched.rows, row for row -> (M, C): each output at
// its copy's row of DispatchToExperts' `sorted`.
at::Tensor CombineFromExperts(const at::Tensor& out, const ExpertRows& dispatched,
                              const ExpertParallel& ep);

}  // namespace conveyor

#endif  // CONVEYOR_NN_EXPERT_DISPATCH_H_
