// 1F1B / PipeDream-flush (Narayanan et al., 2021, arXiv:2006.09503).
#ifndef CONVEYOR_SCHEDULE_BUILDERS_ONE_F_ONE_B_H_
#define CONVEYOR_SCHEDULE_BUILDERS_ONE_F_ONE_B_H_

#include "conveyor/schedule/program.h"
#include "conveyor/schedule/schedule_options.h"

namespace conveyor {

Program BuildOneFOneB(const ScheduleOptions& options);

}  // namespace conveyor

#endif  // CONVEYOR_SCHEDULE_BUILDERS_ONE_F_ONE_B_H_
