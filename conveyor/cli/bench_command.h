// `conveyor bench fidelity` and `conveyor bench overhead`: the executor measured against the
// simulator on real processes, with synthetic stages of known cost.
//
//   fidelity: F, I, W sleep fixed times; per schedule, the measured step time (median over
//             steps of the slowest rank) next to the simulator's makespan for the same
//             program and costs.
//   overhead: F, I, W take no time; the step time divided by the actions of the busiest
//             rank is the executor's own cost per action (posting comms included).
#ifndef CONVEYOR_CLI_BENCH_COMMAND_H_
#define CONVEYOR_CLI_BENCH_COMMAND_H_

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace conveyor::cli {

// `args`: this process's command line without argv[0] (ranks are launched with it).
// `exit_code` receives the command's exit status (the launcher's, or a rank's).
void AddBenchCommand(CLI::App& app, const std::vector<std::string>& args, int* exit_code);

}  // namespace conveyor::cli

#endif  // CONVEYOR_CLI_BENCH_COMMAND_H_
