// Looped breadth-first pipeline (Lamy-Poirier, Breadth-First Pipeline Parallelism, 2023,
// arXiv:2211.05953; PyTorch's ScheduleLoopedBFS).
//
// Layout: Layout::Loop(pp, v, m), v = chunks (default 2): stage s on rank s mod p. Rank r
// runs the forwards of all m micro-batches on its lowest stage, then on its next stage, and
// so on; then the full backwards in exactly the reverse order (highest stage first, last
// micro-batch first). GPipe over v chunks: each rank holds v * m activations at its peak,
// in exchange for the fewest stage switches (and, in the paper, one data-parallel reduction
// per stage that overlaps the remaining backwards).
//
// Uniform per-stage costs, zero communication: makespan (F + B)(vm + p - 1) when m >= p,
// the same as interleaved 1F1B; with m < p the ring never fills, each of the vp stages acts
// as a pipeline stage of its own and the makespan is (F + B)(vp + m - 1) (which no
// loop-placement schedule beats: the last stage's m F and m B start after vp - 1 F, and
// the last gradient then crosses vp - 1 stages back).
//
// Preconditions (UserError naming the value): pp >= 1, microbatches >= 1, chunks >= 1
// (0 = default 2; v = 1 is GPipe). Every m >= 1 is scheduled, m < p included.
#ifndef CONVEYOR_SCHEDULE_BUILDERS_LOOPED_BFS_H_
#define CONVEYOR_SCHEDULE_BUILDERS_LOOPED_BFS_H_

#include "conveyor/schedule/program.h"
#include "conveyor/schedule/schedule_options.h"

namespace conveyor {

Program BuildLoopedBfs(const ScheduleOptions& options);

}  // namespace conveyor

#endif  // CONVEYOR_SCHEDULE_BUILDERS_LOOPED_BFS_H_
