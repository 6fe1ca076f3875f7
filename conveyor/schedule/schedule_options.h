// What every schedule builder takes.
#ifndef CONVEYOR_SCHEDULE_SCHEDULE_OPTIONS_H_
#define CONVEYOR_SCHEDULE_SCHEDULE_OPTIONS_H_

namespace conveyor {

struct ScheduleOptions {
  int pp = 4;            // pipeline ranks (p)
  int microbatches = 8;  // micro-batches per step (m)
  int chunks = 0;        // chunks (stages) per rank (v); 0 = the schedule's default
};

}  // namespace conveyor

#endif  // CONVEYOR_SCHEDULE_SCHEDULE_OPTIONS_H_
