// Summaries of measured samples.
#ifndef CONVEYOR_COMMON_STATISTICS_H_
#define CONVEYOR_COMMON_STATISTICS_H_

#include <vector>

namespace conveyor {

// The median of `values` (the mean of the middle two of an even count). Precondition: not
// empty.
double Median(std::vector<double> values);

}  // namespace conveyor

#endif  // CONVEYOR_COMMON_STATISTICS_H_
