// `conveyor bench fidelity`: the executor measured against the simulator on real processes.
// Synthetic stages sleep fixed F, I, W times; per schedule, the measured step time (median
// over steps of the slowest rank) next to the simulator's makespan for the same program and
// costs, with and without the hop time measured between neighbouring ranks.
#ifndef CONVEYOR_CLI_BENCH_FIDELITY_H_
#define CONVEYOR_CLI_BENCH_FIDELITY_H_

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace conveyor {

// Adds `fidelity` to `bench`. `args`: this process's command line without argv[0] (ranks are
// launched with it); `exit_code` receives the command's exit status.
void AddBenchFidelity(CLI::App& bench, const std::vector<std::string>& args, int* exit_code);

}  // namespace conveyor

#endif  // CONVEYOR_CLI_BENCH_FIDELITY_H_
