// Per-rank training metrics as the JSON rows of `conveyor train --metrics` (the "ranks"
// array) and `conveyor bench train`.
#ifndef CONVEYOR_CLI_METRICS_JSON_H_
#define CONVEYOR_CLI_METRICS_JSON_H_

#include <nlohmann/json.hpp>
#include <vector>

#include "conveyor/train/rank_report.h"

namespace conveyor {

// One object per rank with every field of RankReport under its own name.
nlohmann::json RankRowsJson(const std::vector<RankReport>& ranks);

}  // namespace conveyor

#endif  // CONVEYOR_CLI_METRICS_JSON_H_
