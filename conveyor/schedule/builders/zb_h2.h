// ZB-H2 (Qi et al., Zero Bubble Pipeline Parallelism, ICLR 2024, arXiv:2401.10241).
//
// Split backward (I and W) on a loop placement with one stage per rank. More forwards in
// the warm-up than 1F1B (up to 2p - 1 micro-batches in flight, counted from F until W) and
// W passes pushed into what would be bubbles: with F = I = W and m >= 2p a single step takes
// 3m + p - 1, the one-directional lower bound, and steps run back to back have a period of
// 3m, i.e. no bubble. The order is recorded by the greedy zero-bubble scheduler
// (greedy_zero_bubble.h) with a cap of 2p - 1.
//
// Preconditions (UserError naming the value): pp >= 1, microbatches >= 1, chunks 0 or 1.
// Any m works, m < p included (the references assume m >= p).
#ifndef CONVEYOR_SCHEDULE_BUILDERS_ZB_H2_H_
#define CONVEYOR_SCHEDULE_BUILDERS_ZB_H2_H_

#include "conveyor/schedule/program.h"
#include "conveyor/schedule/schedule_options.h"

namespace conveyor {

Program BuildZbH2(const ScheduleOptions& options);

}  // namespace conveyor

#endif  // CONVEYOR_SCHEDULE_BUILDERS_ZB_H2_H_
