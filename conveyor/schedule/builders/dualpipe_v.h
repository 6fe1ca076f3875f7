// DualPipeV: DualPipe "cut in half" onto a V placement (DeepSeek-AI, 2025; the
// DualPipeV of the DualPipe repository and of PyTorch).
//
// One direction, two stages per rank (rank r holds stages r and 2p-1-r), 1x parameters,
// the eight phases of dualpipe_phases.h with n = p; the last rank runs its first F / B pair
// one after the other. For p = 4, m = 10 the program is PyTorch's, action for action; with
// F = I = W and m >= 2p a step takes 6m + p - 1, the one-directional bound.
//
// Preconditions: pp >= 1, microbatches >= 1, chunks 0 or 2. The phases need m >= 2p; with
// fewer micro-batches there is nothing to overlap and conveyor uses ZB-V's order on the
// same placement.
#ifndef CONVEYOR_SCHEDULE_BUILDERS_DUALPIPE_V_H_
#define CONVEYOR_SCHEDULE_BUILDERS_DUALPIPE_V_H_

#include "conveyor/schedule/program.h"
#include "conveyor/schedule/schedule_options.h"

namespace conveyor {

Program BuildDualPipeV(const ScheduleOptions& options);

}  // namespace conveyor

#endif  // CONVEYOR_SCHEDULE_BUILDERS_DUALPIPE_V_H_
