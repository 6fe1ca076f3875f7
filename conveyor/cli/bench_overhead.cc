#include "conveyor/cli/bench_overhead.h"

#include <cstdio>
#include <memory>

#include "conveyor/cli/bench_synthetic.h"
#include "conveyor/profile/memory_tracker.h"

namespace conveyor {
namespace {

// Microseconds per action of the busiest rank in a step of `m`.
double MicrosecondsPerAction(const SyntheticMeasurement& m, double step_s) {
  return 1e6 * step_s / static_cast<double>(m.actions_per_rank);
}

// Every schedule's row untraced, then (after installing the counting allocator) the same
// schedules traced. Collective.
nlohmann::json OverheadRows(Transport& transport, const SyntheticBenchFlags& flags,
                            const std::vector<std::string>& names) {
  nlohmann::json rows = nlohmann::json::array();
  for (const std::string& name : names) {
    const SyntheticMeasurement m = MeasureSynthetic(transport, flags, name, /*traced=*/false);
    nlohmann::json row = m.row;
    if (!m.skipped()) {
      row["us_per_action"] = MicrosecondsPerAction(m, m.measured_s);
      row["executor_us_per_action"] = MicrosecondsPerAction(m, m.executor_s);
    }
    rows.push_back(row);
  }
  // The same again with tracing on: spans, counters and the counting allocator.
  MemoryTracker::Install();
  for (auto& row : rows) {
    if (row.contains("skipped")) continue;
    const SyntheticMeasurement traced =
        MeasureSynthetic(transport, flags, row["schedule"], /*traced=*/true);
    row["traced_s"] = traced.measured_s;
    row["traced_us_per_action"] = MicrosecondsPerAction(traced, traced.measured_s);
  }
  return rows;
}

std::string OverheadTable(const nlohmann::json& rows) {
  return BenchTable(rows,
                    Printf("%-17s %9s %12s %12s %12s %12s\n", "schedule", "actions", "step ms",
                           "us/action", "executor", "traced"),
                    [](const nlohmann::json& row) {
                      const std::string name = row["schedule"];
                      return Printf("%-17s %9d %12.3f %12.1f %12.1f %12.1f\n", name.c_str(),
                                    row["actions_per_rank"].get<int>(),
                                    1e3 * row["measured_s"].get<double>(),
                                    row["us_per_action"].get<double>(),
                                    row["executor_us_per_action"].get<double>(),
                                    row["traced_us_per_action"].get<double>());
                    });
}

}  // namespace

void AddBenchOverhead(CLI::App& bench, const std::vector<std::string>& args, int* exit_code) {
  auto flags = std::make_shared<SyntheticBenchFlags>();
  flags->f = flags->i = flags->w = 0;
  flags->microbatches = 16;
  flags->steps = 20;
  CLI::App* cmd = bench.add_subcommand(
      "overhead", "executor cost per action with stages that take no time, tracing off and on");
  RegisterSyntheticBenchFlags(cmd, *flags, /*stage_costs=*/false);
  cmd->callback([flags, args, exit_code] {
    *exit_code = RunSyntheticBench(
        *flags, args,
        [&](Transport& transport, const std::vector<std::string>& names) {
          return OverheadRows(transport, *flags, names);
        },
        OverheadTable);
  });
}

}  // namespace conveyor
