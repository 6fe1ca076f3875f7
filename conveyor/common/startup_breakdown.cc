#include "conveyor/common/startup_breakdown.h"

#include <algorithm>

#include "conveyor/common/process_stats.h"

namespace conveyor {

void StartupBreakdown::End(double StartupBreakdown::*field) {
  const double before = total_s() - this->*field;
  // Never negative: the process's start time is known to 10 ms only.
  this->*field = std::max(0.0, SecondsSinceProcessStart() - before);
}

double StartupBreakdown::total_s() const {
  double total = 0;
  for (const StartupPhase& phase : kStartupPhases) total += this->*phase.field;
  return total;
}

}  // namespace conveyor
