// GPipe: fill, then drain (Huang et al., GPipe, 2019, arXiv:1811.06965).
//
// Layout: Layout::Loop(pp, 1, m). Every rank runs the forwards of all m micro-batches in
// order, then their full backwards B in the same order. Uniform costs, zero communication:
// makespan (m + p - 1)(F + B), bubble (p - 1)(F + B) per rank; every rank holds all m
// micro-batches' activations at its peak.
//
// Preconditions (UserError naming the value): pp >= 1, microbatches >= 1, chunks 0 or 1.
// (Several stages per rank, breadth-first, is looped BFS: see looped_bfs.h.)
#ifndef CONVEYOR_SCHEDULE_BUILDERS_GPIPE_H_
#define CONVEYOR_SCHEDULE_BUILDERS_GPIPE_H_

#include "conveyor/schedule/program.h"
#include "conveyor/schedule/schedule_options.h"

namespace conveyor {

Program BuildGpipe(const ScheduleOptions& options);

}  // namespace conveyor

#endif  // CONVEYOR_SCHEDULE_BUILDERS_GPIPE_H_
