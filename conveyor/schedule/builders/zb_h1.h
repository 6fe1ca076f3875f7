// ZB-H1: 1F1B with the backward split into I (input gradient) and W (weight gradient), the
// weight passes deferred into the pipeline's bubbles (Qi et al., Zero Bubble Pipeline
// Parallelism, ICLR 2024, arXiv:2401.10241, "ZB-H1" / ZB1P).
//
// Layout: Layout::Loop(pp, 1, m). Rank r runs 1F1B over F and I (warm-up min(p - r - 1, m)
// forwards, then one F and one I alternately, then the remaining I), and places its W
// passes r micro-batches behind its I passes: right after its k-th I comes the W of
// micro-batch k - r; its last r W passes close the list. Rank 0 is 1F1B with each B split
// into I then W; the last rank defers W the most, filling the cool-down bubble that 1F1B
// leaves there, while the I chain back to rank 0 gets shorter (I instead of B).
//
// Uniform costs F = I = W, m >= p, zero communication: makespan m(F + I + W) +
// (p - 1)(F + I - W) = 3m + p - 1 in units of F (1F1B: 3(m + p - 1)), a third of 1F1B's
// bubble. Counting a micro-batch from its F until its W, every rank holds at most
// min(p, m) micro-batches: no more than 1F1B's peak (rank 0's).
//
// Preconditions (UserError naming the value): pp >= 1, microbatches >= 1, chunks 0 or 1.
// m < p is scheduled (references build ZB-H1 for m >= p): warm-up is capped at m and W
// passes that the lag pushes past the last I run at the end. Makespan with F = I = W = 1:
// 2(m + p - 1) + 1: the last micro-batch's forward and input-gradient chains through
// the p stages, then rank 0's last W (no schedule does better).
#ifndef CONVEYOR_SCHEDULE_BUILDERS_ZB_H1_H_
#define CONVEYOR_SCHEDULE_BUILDERS_ZB_H1_H_

#include "conveyor/schedule/program.h"
#include "conveyor/schedule/schedule_options.h"

namespace conveyor {

Program BuildZbH1(const ScheduleOptions& options);

}  // namespace conveyor

#endif  // CONVEYOR_SCHEDULE_BUILDERS_ZB_H1_H_
