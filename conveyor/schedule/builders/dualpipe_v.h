// DualPipeV: DualPipe folded onto p ranks with V placement (DeepSeek-AI, 2025; 'cut-in-half'
// DualPipe).
#ifndef CONVEYOR_SCHEDULE_BUILDERS_DUALPIPE_V_H_
#define CONVEYOR_SCHEDULE_BUILDERS_DUALPIPE_V_H_

#include "conveyor/schedule/program.h"
#include "conveyor/schedule/schedule_options.h"

namespace conveyor {

Program BuildDualPipeV(const ScheduleOptions& options);

}  // namespace conveyor

#endif  // CONVEYOR_SCHEDULE_BUILDERS_DUALPIPE_V_H_
