// A greedy zero-bubble list scheduler, after the automatic scheduler of Zero Bubble
// Pipeline Parallelism (Qi et al., ICLR 2024, arXiv:2401.10241, section 3).
//
// It plays one step with unit costs (F = I = W = 1, no communication) and records what
// each rank runs. A rank that is free starts, among the passes whose inputs are there:
//   1. an I (backward for inputs): it unblocks the previous stage, the critical path;
//   2. else an F, if the rank holds fewer than `max_in_flight` micro-batch activations
//      (counted from F until W): new work that keeps later stages busy;
//   3. else the oldest deferred W: W passes fill what would be bubbles.
// Among stages of one rank, the one nearest the loss goes first (for I and F); within a
// stage, micro-batches go in order. When every rank would idle with work left because of
// the cap, the cap is raised by one (the schedule stays correct; its memory grows).
//
// Any layout works (loop, V, two directions); the program is deadlock-free by
// construction because it is the record of a feasible execution.
#ifndef CONVEYOR_SCHEDULE_BUILDERS_GREEDY_ZERO_BUBBLE_H_
#define CONVEYOR_SCHEDULE_BUILDERS_GREEDY_ZERO_BUBBLE_H_

#include "conveyor/schedule/program.h"

namespace conveyor {

Program GreedyZeroBubble(const Layout& layout, int max_in_flight);

}  // namespace conveyor

#endif  // CONVEYOR_SCHEDULE_BUILDERS_GREEDY_ZERO_BUBBLE_H_
