// Command-line flags shared by `plan`, `compare` and `bench`: the simulator's cost model.
#ifndef CONVEYOR_CLI_COST_FLAGS_H_
#define CONVEYOR_CLI_COST_FLAGS_H_

#include <CLI/CLI.hpp>
#include <optional>
#include <string>

#include "conveyor/sim/cost_model.h"

namespace conveyor {

// The largest time, bandwidth or byte count the cost flags accept: far above any real cost
// in any unit, low enough that sums over the largest programs stay exact enough.
inline constexpr double kMaxCostFlag = 1e15;

struct CostFlags {
  double f = 1, i = 1, w = 1;
  std::optional<double> b;        // unset: I + W
  std::optional<double> overlap;  // unset: F + B
  double comm_latency = 0;
  double comm_bandwidth = 0;  // 0: infinite
  double message_bytes = 0;
  double mem_w = 1;  // fraction of a micro-batch's activation that only W frees

  void Register(CLI::App& app);
  // Checks the values (UserError naming a bad one: each must be finite and within
  // [0, kMaxCostFlag], --mem-w within [0, 1]) and builds the cost model.
  CostModel ToCostModel() const;
  // "F=1 I=1 W=1 B=2 comm=0"
  std::string Describe() const;
};

}  // namespace conveyor

#endif  // CONVEYOR_CLI_COST_FLAGS_H_
