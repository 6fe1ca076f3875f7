// Naive model parallelism: no pipelining. One micro-batch at a time goes forward through
// every stage and backward again before the next one starts, so exactly one rank computes
// at any moment (the baseline every pipeline schedule is measured against; with m = 1 it
// is plain model parallelism, e.g. the "naive" case of GPipe, Huang et al., 2019,
// arXiv:1811.06965).
//
// Layout: Layout::Loop(pp, 1, m). Rank r runs F(r, 0) B(r, 0) F(r, 1) B(r, 1) ... with full
// backward B. Uniform costs, zero communication: makespan m * p * (F + B); every rank holds
// at most one micro-batch's activations.
//
// Preconditions (UserError naming the value): pp >= 1, microbatches >= 1, chunks 0 or 1.
// Any m >= 1 is accepted (references only describe m = 1).
#ifndef CONVEYOR_SCHEDULE_BUILDERS_NAIVE_H_
#define CONVEYOR_SCHEDULE_BUILDERS_NAIVE_H_

#include "conveyor/schedule/program.h"
#include "conveyor/schedule/schedule_options.h"

namespace conveyor {

Program BuildNaive(const ScheduleOptions& options);

}  // namespace conveyor

#endif  // CONVEYOR_SCHEDULE_BUILDERS_NAIVE_H_
