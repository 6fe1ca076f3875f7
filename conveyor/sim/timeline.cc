#include "conveyor/sim/timeline.h"

#include <algorithm>

namespace conveyor {

double Timeline::makespan() const {
  double end = 0;
  for (const Span& s : spans) end = std::max(end, s.end);
  return end;
}

}  // namespace conveyor
