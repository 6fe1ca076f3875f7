// `conveyor bench hop`: the one-way time of a message between neighbouring ranks (median of
// ping-pongs, MeasureHopLatency), at the sizes of a tiny activation (4 B), of the default
// GPT's (32 KiB) and of a larger one's (256 KiB).
#ifndef CONVEYOR_CLI_BENCH_HOP_H_
#define CONVEYOR_CLI_BENCH_HOP_H_

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace conveyor {

// Adds `hop` to `bench`. `args`: this process's command line without argv[0] (ranks are
// launched with it); `exit_code` receives the command's exit status.
void AddBenchHop(CLI::App& bench, const std::vector<std::string>& args, int* exit_code);

}  // namespace conveyor

#endif  // CONVEYOR_CLI_BENCH_HOP_H_
