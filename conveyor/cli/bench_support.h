// What the benches of `conveyor bench` share: the --schedules list, the --format / --out
// pair and the writing of their rows, the median of timed steps, and the table line of a
// schedule that could not run.
#ifndef CONVEYOR_CLI_BENCH_SUPPORT_H_
#define CONVEYOR_CLI_BENCH_SUPPORT_H_

#include <CLI/CLI.hpp>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "conveyor/common/statistics.h"
#include "conveyor/common/text.h"

namespace conveyor {

// The schedules a comma-separated --schedules value names (every registered schedule when
// empty), in its order. UserError naming an unknown schedule.
std::vector<std::string> SelectedSchedules(const std::string& list);

// A bench's text table: `header`, then one line per row, `line(row)` for a measured row and,
// for a row {schedule, skipped}, the schedule's name and why it was skipped.
std::string BenchTable(const nlohmann::json& rows, const std::string& header,
                       const std::function<std::string(const nlohmann::json&)>& line);

// --format (text or json) and --out of a bench.
struct BenchOutput {
  std::string format = "text";
  std::string out;  // empty: stdout

  // Adds --format,-f and --out,-o to `cmd`, bound to this object (which must outlive it).
  void Register(CLI::App* cmd);
  // Writes `rows` as indented JSON, or as the text `table` makes of them, to --out or stdout
  // (WriteOutput). UserError when it cannot be written.
  void Write(const nlohmann::json& rows,
             const std::function<std::string(const nlohmann::json&)>& table) const;
};

}  // namespace conveyor

#endif  // CONVEYOR_CLI_BENCH_SUPPORT_H_
