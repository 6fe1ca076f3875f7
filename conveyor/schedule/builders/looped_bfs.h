// Looped breadth-first (Lamy-Poirier, 2023, arXiv:2211.05953).
#ifndef CONVEYOR_SCHEDULE_BUILDERS_LOOPED_BFS_H_
#define CONVEYOR_SCHEDULE_BUILDERS_LOOPED_BFS_H_

#include "conveyor/schedule/program.h"
#include "conveyor/schedule/schedule_options.h"

namespace conveyor {

Program BuildLoopedBfs(const ScheduleOptions& options);

}  // namespace conveyor

#endif  // CONVEYOR_SCHEDULE_BUILDERS_LOOPED_BFS_H_
