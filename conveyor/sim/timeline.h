// What ran where and when: the common currency of the simulator, the renderers and (later)
// measured runs, so predicted and measured timelines are drawn and compared alike.
#ifndef CONVEYOR_SIM_TIMELINE_H_
#define CONVEYOR_SIM_TIMELINE_H_

#include <string>
#include <vector>

#include "conveyor/schedule/action.h"

namespace conveyor {

struct Span {
  int rank = 0;
  Action action;
  double start = 0;  // seconds, or cost units in a simulation
  double end = 0;
};

struct Timeline {
  int num_ranks = 0;
  std::vector<Span> spans;          // any order; renderers sort as they need
  std::string time_unit = "units";  // "units" for cost-model units, "s" for measured

  // Latest end over all spans (0 when empty).
  double makespan() const;
};

}  // namespace conveyor

#endif  // CONVEYOR_SIM_TIMELINE_H_
