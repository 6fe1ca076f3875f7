// The machinery of `conveyor bench fidelity` and `conveyor bench overhead`: each selected
// schedule run by the real executor over --pp processes, with synthetic stages whose F, I
// and W sleep fixed times (SyntheticStage), and timed step by step.
#ifndef CONVEYOR_CLI_BENCH_SYNTHETIC_H_
#define CONVEYOR_CLI_BENCH_SYNTHETIC_H_

#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "conveyor/cli/bench_support.h"
#include "conveyor/cli/launch_flags.h"
#include "conveyor/comm/transport.h"
#include "conveyor/schedule/program.h"

namespace conveyor {

// Numbers as 64 bits: a value too large for an int is refused by name, not wrapped.
struct SyntheticBenchFlags {
  int64_t pp = 4;
  int64_t microbatches = 8;
  double f = 0.02, i = 0.02, w = 0.02;  // seconds of one F, I, W
  int64_t steps = 3;
  std::string schedules;  // comma-separated; empty = all
  BenchOutput output;
  int64_t timeout_s = 120;
  LaunchFlags launch;
};

// Adds the flags to `cmd` with `flags`' values as defaults: --pp, --microbatches, --f, --i
// and --w when `stage_costs`, --steps, --schedules, --format, --out, --timeout and the
// launch flags. `flags` must outlive `cmd`.
void RegisterSyntheticBenchFlags(CLI::App* cmd, SyntheticBenchFlags& flags, bool stage_costs);

// One schedule, measured.
struct SyntheticMeasurement {
  Program program{Layout::Loop(1, 1, 1)};  // as built for flags.pp and microbatches
  int64_t actions_per_rank = 0;            // of the busiest rank's lowered program
  double measured_s = 0;                   // median over the steps of the slowest rank's step
  // Median over the steps of the most time a rank spent in the executor itself (its step
  // less computes and waits).
  double executor_s = 0;
  // {schedule, pp, microbatches, measured_s, actions_per_rank}, or {schedule, skipped: why}
  // when the schedule cannot be built (then nothing else is set).
  nlohmann::json row;
  bool skipped() const { return row.contains("skipped"); }
};

// Builds schedule `name` for flags.pp ranks and flags.microbatches, then runs its lowered
// program once (a warm-up) and flags.steps timed steps over this rank's synthetic stages;
// with `traced`, every timed step runs under a StepRecorder. A schedule that cannot be built
// for these sizes is skipped, not an error. Collective over `transport`.
SyntheticMeasurement MeasureSynthetic(Transport& transport, const SyntheticBenchFlags& flags,
                                      const std::string& name, bool traced);

// Checks the flags (UserError naming a flag out of range or an unknown schedule), runs
// flags.pp ranks and on each calls `measure` with the selected schedules; rank 0 writes the
// rows it returns, as JSON or as the text `table` makes of them. Returns the exit status.
int RunSyntheticBench(
    const SyntheticBenchFlags& flags, const std::vector<std::string>& args,
    const std::function<nlohmann::json(Transport&, const std::vector<std::string>&)>& measure,
    const std::function<std::string(const nlohmann::json&)>& table);

}  // namespace conveyor

#endif  // CONVEYOR_CLI_BENCH_SYNTHETIC_H_
