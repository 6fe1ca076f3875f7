// Naive model parallelism: one micro-batch at a time, fill then drain.
#ifndef CONVEYOR_SCHEDULE_BUILDERS_NAIVE_H_
#define CONVEYOR_SCHEDULE_BUILDERS_NAIVE_H_

#include "conveyor/schedule/program.h"
#include "conveyor/schedule/schedule_options.h"

namespace conveyor {

Program BuildNaive(const ScheduleOptions& options);

}  // namespace conveyor

#endif  // CONVEYOR_SCHEDULE_BUILDERS_NAIVE_H_
