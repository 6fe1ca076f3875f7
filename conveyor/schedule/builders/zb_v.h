// ZB-V (Qi et al., Pipeline Parallelism with Controllable Memory, NeurIPS 2024,
// arXiv:2405.15362).
//
// V placement: rank r holds stages r and 2p-1-r, so rank 0 holds the first and the last
// stage. Warm-up fills the way down with 2(p-r)-1 forwards, interleaves the way up, then
// runs F, I, W on each of its two stages in turn; the cool-down leaves W passes for the tail.
// With F = I = W and m >= 2p a step takes 6m + p - 1 (the bound 3vm + p - 1 with v = 2) and
// the steady-state period is 6m: no bubble, at 1F1B's memory (2p half-size stage
// activations per rank, the bytes of p full-stage ones).
//
// Preconditions: pp >= 1, microbatches >= 1, chunks 0 or 2. PyTorch pads m to 2p - 1;
// conveyor builds the order for max(m, 2p - 1) micro-batches and drops the passes of the
// ones that do not exist, which keeps every dependency, so any m >= 1 works.
#ifndef CONVEYOR_SCHEDULE_BUILDERS_ZB_V_H_
#define CONVEYOR_SCHEDULE_BUILDERS_ZB_V_H_

#include "conveyor/schedule/program.h"
#include "conveyor/schedule/schedule_options.h"

namespace conveyor {

Program BuildZbV(const ScheduleOptions& options);

}  // namespace conveyor

#endif  // CONVEYOR_SCHEDULE_BUILDERS_ZB_V_H_
