// 1F1B, also PipeDream-flush (Narayanan et al., Memory-Efficient Pipeline-Parallel DNN
// Training, 2021, arXiv:2006.09503).
//
// Layout: Layout::Loop(pp, 1, m). Rank r warms up with min(p - r - 1, m) forwards, then
// alternates one forward and one full backward B while forwards remain (steady state), then
// runs the remaining backwards (cool-down). Micro-batches go in ascending order in both
// directions. Uniform costs, zero communication: makespan (m + p - 1)(F + B), like GPipe,
// but rank r holds at most min(p - r, m) micro-batches' activations (rank 0: min(p, m)).
//
// Preconditions (UserError naming the value): pp >= 1, microbatches >= 1, chunks 0 or 1.
// PyTorch's Schedule1F1B refuses m < p; conveyor schedules it: with m <= p - r - 1 rank r
// runs all its forwards, then all its backwards (GPipe on that rank), and the makespan is
// still (m + p - 1)(F + B).
#ifndef CONVEYOR_SCHEDULE_BUILDERS_1F1B_H_
#define CONVEYOR_SCHEDULE_BUILDERS_1F1B_H_

#include "conveyor/schedule/program.h"
#include "conveyor/schedule/schedule_options.h"

namespace conveyor {

Program Build1F1B(const ScheduleOptions& options);

}  // namespace conveyor

#endif  // CONVEYOR_SCHEDULE_BUILDERS_1F1B_H_
