// Interleaved 1F1B over v chunks per rank (Narayanan et al., 2021, arXiv:2104.04473).
#ifndef CONVEYOR_SCHEDULE_BUILDERS_INTERLEAVED_1F1B_H_
#define CONVEYOR_SCHEDULE_BUILDERS_INTERLEAVED_1F1B_H_

#include "conveyor/schedule/program.h"
#include "conveyor/schedule/schedule_options.h"

namespace conveyor {

Program BuildInterleaved1F1B(const ScheduleOptions& options);

}  // namespace conveyor

#endif  // CONVEYOR_SCHEDULE_BUILDERS_INTERLEAVED_1F1B_H_
