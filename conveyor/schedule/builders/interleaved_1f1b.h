// Interleaved 1F1B over v chunks (stages) per rank (Narayanan et al., Efficient Large-Scale
// Language Model Training on GPU Clusters Using Megatron-LM, 2021, arXiv:2104.04473).
//
// Layout: Layout::Loop(pp, v, m), v = chunks (default 2): stage s on rank s mod p, so each
// micro-batch loops v times around the ranks. Micro-batches are cut into consecutive groups
// (GroupSizes in builder_util.h). Rank r lists its forwards group by group, and within a
// group chunk by chunk (ascending), each chunk over the group's micro-batches; its full
// backwards B the same way with chunks descending. It runs
//   warm-up = 2(p - r - 1) + (v - 1) g0 forwards (g0 = size of the first group, capped at
//   the v m forwards it has),
// then one forward and one backward alternately, then the remaining backwards.
//
// When p divides m the groups all hold p micro-batches: this is Megatron-LM's and PyTorch's
// schedule (warm-up 2(p - r - 1) + (v - 1) p), and with uniform per-stage costs and zero
// communication the makespan is v m (F + B) + (p - 1)(F + B).
//
// Other m, which Megatron-LM (group size in [p, m], m mod group 0 or >= p) and PyTorch
// (m // p rounds must divide m) refuse, are scheduled too:
//   * m > p, p not dividing m: max(1, m / p) groups whose sizes differ by at most one, the
//     larger first, each between p and 2p - 1 (m = 10, p = 4: groups 5, 5; m = 11: 6, 5).
//     Where PyTorch accepts such an m (equal groups, e.g. m = 10, p = 4), this is its
//     schedule. Makespan with uniform costs: (F + B)(vm + p - 1), the same closed form as
//     when p divides m (tested for p <= 8, v <= 4, m <= 3p + 1), at a warm-up (and peak
//     memory) of 2(p - r - 1) + (v - 1) g0 forwards on rank r.
//   * m < p: one group of m; every rank whose 2(p - r - 1) >= m warms up with all its
//     forwards (breadth-first). Makespan (F + B)(vp + m - 1): with fewer micro-batches than
//     ranks the ring never fills, so the vp stages act as a vp-stage pipeline, and no
//     loop-placement schedule does better.
// Deadlock-free: the tests lower and verify every p <= 8, v <= 4, m <= 3p + 1.
//
// Preconditions (UserError naming the value): pp >= 1, microbatches >= 1, chunks 0
// (default 2) or >= 2 (one chunk per rank is plain 1F1B: use "1f1b").
#ifndef CONVEYOR_SCHEDULE_BUILDERS_INTERLEAVED_1F1B_H_
#define CONVEYOR_SCHEDULE_BUILDERS_INTERLEAVED_1F1B_H_

#include "conveyor/schedule/program.h"
#include "conveyor/schedule/schedule_options.h"

namespace conveyor {

Program BuildInterleaved1F1B(const ScheduleOptions& options);

}  // namespace conveyor

#endif  // CONVEYOR_SCHEDULE_BUILDERS_INTERLEAVED_1F1B_H_
