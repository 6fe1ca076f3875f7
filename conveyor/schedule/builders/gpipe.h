// GPipe: all forwards, then all backwards (Huang et al., 2019, arXiv:1811.06965).
#ifndef CONVEYOR_SCHEDULE_BUILDERS_GPIPE_H_
#define CONVEYOR_SCHEDULE_BUILDERS_GPIPE_H_

#include "conveyor/schedule/program.h"
#include "conveyor/schedule/schedule_options.h"

namespace conveyor {

Program BuildGpipe(const ScheduleOptions& options);

}  // namespace conveyor

#endif  // CONVEYOR_SCHEDULE_BUILDERS_GPIPE_H_
