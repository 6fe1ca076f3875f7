// `conveyor bench`: measurements of the runtime on real processes (over Gloo), one
// subcommand per bench:
//   fidelity  the executor's step time against the simulator's (bench_fidelity.h)
//   overhead  the executor's own cost per action, tracing off and on (bench_overhead.h)
//   train     a training configuration under each schedule and in one process (bench_train.h)
//   hop       the one-way time of a message between neighbouring ranks (bench_hop.h)
#ifndef CONVEYOR_CLI_BENCH_COMMAND_H_
#define CONVEYOR_CLI_BENCH_COMMAND_H_

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace conveyor {

// `args`: this process's command line without argv[0] (ranks are launched with it).
// `exit_code` receives the command's exit status (the launcher's, or a rank's).
void AddBenchCommand(CLI::App& app, const std::vector<std::string>& args, int* exit_code);

}  // namespace conveyor

#endif  // CONVEYOR_CLI_BENCH_COMMAND_H_
