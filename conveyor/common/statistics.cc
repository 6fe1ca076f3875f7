#include "conveyor/common/statistics.h"

#include <algorithm>

#include "conveyor/common/error.h"

namespace conveyor {

double Median(std::vector<double> values) {
  CONVEYOR_ASSERT(!values.empty()) << "the median of no values";
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

}  // namespace conveyor
