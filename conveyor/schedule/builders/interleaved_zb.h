// Interleaved zero bubble: ZB-H1's split backward over v chunks per rank (loop placement),
// as PyTorch's interleaved zero-bubble schedule does (after Qi et al., arXiv:2401.10241).
//
// Recorded by the greedy zero-bubble scheduler with interleaved 1F1B's rank-0 memory,
// (v + 1) p - 1 stage activations. With F = I = W and m a multiple of p with m >= 2p, a
// step takes 3vm + p - 1, the one-directional lower bound (PyTorch's own program for p = 2,
// v = 2, m = 8 takes 49; so does this one).
//
// Preconditions: pp >= 1, microbatches >= 1, chunks 0 (= 2) or >= 2. PyTorch needs
// m % max(1, m / p) == 0; conveyor schedules every m >= 1.
#ifndef CONVEYOR_SCHEDULE_BUILDERS_INTERLEAVED_ZB_H_
#define CONVEYOR_SCHEDULE_BUILDERS_INTERLEAVED_ZB_H_

#include "conveyor/schedule/program.h"
#include "conveyor/schedule/schedule_options.h"

namespace conveyor {

Program BuildInterleavedZb(const ScheduleOptions& options);

}  // namespace conveyor

#endif  // CONVEYOR_SCHEDULE_BUILDERS_INTERLEAVED_ZB_H_
