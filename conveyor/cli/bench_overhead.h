// `conveyor bench overhead`: the executor's own cost. Synthetic stages take no time; per
// schedule, the step time divided by the actions of the busiest rank is the executor's cost
// per action (posting comms included), measured with tracing off, then on (StepRecorder and
// the counting allocator).
#ifndef CONVEYOR_CLI_BENCH_OVERHEAD_H_
#define CONVEYOR_CLI_BENCH_OVERHEAD_H_

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace conveyor {

// Adds `overhead` to `bench`. `args`: this process's command line without argv[0] (ranks are
// launched with it); `exit_code` receives the command's exit status.
void AddBenchOverhead(CLI::App& bench, const std::vector<std::string>& args, int* exit_code);

}  // namespace conveyor

#endif  // CONVEYOR_CLI_BENCH_OVERHEAD_H_
