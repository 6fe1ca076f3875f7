// Interleaved zero bubble (ZB1P over v chunks; arXiv:2401.10241).
#ifndef CONVEYOR_SCHEDULE_BUILDERS_INTERLEAVED_ZB_H_
#define CONVEYOR_SCHEDULE_BUILDERS_INTERLEAVED_ZB_H_

#include "conveyor/schedule/program.h"
#include "conveyor/schedule/schedule_options.h"

namespace conveyor {

Program BuildInterleavedZb(const ScheduleOptions& options);

}  // namespace conveyor

#endif  // CONVEYOR_SCHEDULE_BUILDERS_INTERLEAVED_ZB_H_
