// DualPipe (DeepSeek-AI, DeepSeek-V3 Technical Report, 2024, arXiv:2412.19437).
//
// Two pipelines in opposite directions over the same p ranks (Layout::Dual): rank r holds
// stage r of the forward pipeline and part p-1-r of the reverse one, so every rank keeps
// two copies' worth of parameters (2x), and the copies' gradients are summed. Half the
// micro-batches enter at rank 0, half at rank p-1. Each rank runs the eight phases of
// dualpipe_phases.h with overlapped (F ; B) pairs in the middle.
//
// Preconditions: pp >= 1, microbatches >= 2, chunks 0 or 2. The phases need p even, m even
// and m >= 2p (as the reference does); for any other input conveyor orders the same
// two-direction layout with the greedy zero-bubble scheduler (no overlapped pairs, memory
// target p + 1), so the run still works.
#ifndef CONVEYOR_SCHEDULE_BUILDERS_DUALPIPE_H_
#define CONVEYOR_SCHEDULE_BUILDERS_DUALPIPE_H_

#include "conveyor/schedule/program.h"
#include "conveyor/schedule/schedule_options.h"

namespace conveyor {

Program BuildDualPipe(const ScheduleOptions& options);

}  // namespace conveyor

#endif  // CONVEYOR_SCHEDULE_BUILDERS_DUALPIPE_H_
