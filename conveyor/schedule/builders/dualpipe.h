// DualPipe (DeepSeek-AI, DeepSeek-V3 Technical Report, 2024, arXiv:2412.19437).
#ifndef CONVEYOR_SCHEDULE_BUILDERS_DUALPIPE_H_
#define CONVEYOR_SCHEDULE_BUILDERS_DUALPIPE_H_

#include "conveyor/schedule/program.h"
#include "conveyor/schedule/schedule_options.h"

namespace conveyor {

Program BuildDualPipe(const ScheduleOptions& options);

}  // namespace conveyor

#endif  // CONVEYOR_SCHEDULE_BUILDERS_DUALPIPE_H_
