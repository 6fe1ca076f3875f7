// ZB-H1 (Qi et al., Zero Bubble Pipeline Parallelism, ICLR 2024, arXiv:2401.10241).
#ifndef CONVEYOR_SCHEDULE_BUILDERS_ZB_H1_H_
#define CONVEYOR_SCHEDULE_BUILDERS_ZB_H1_H_

#include "conveyor/schedule/program.h"
#include "conveyor/schedule/schedule_options.h"

namespace conveyor {

Program BuildZbH1(const ScheduleOptions& options);

}  // namespace conveyor

#endif  // CONVEYOR_SCHEDULE_BUILDERS_ZB_H1_H_
