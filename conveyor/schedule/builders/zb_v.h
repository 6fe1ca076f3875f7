// ZB-V (Qi et al., Pipeline Parallelism with Controllable Memory, NeurIPS 2024, arXiv:2405.15362).
#ifndef CONVEYOR_SCHEDULE_BUILDERS_ZB_V_H_
#define CONVEYOR_SCHEDULE_BUILDERS_ZB_V_H_

#include "conveyor/schedule/program.h"
#include "conveyor/schedule/schedule_options.h"

namespace conveyor {

Program BuildZbV(const ScheduleOptions& options);

}  // namespace conveyor

#endif  // CONVEYOR_SCHEDULE_BUILDERS_ZB_V_H_
