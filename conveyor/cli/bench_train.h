// `conveyor bench train`: the training configuration of the command line (a TOML file and
// train flags) run for a few steps under each selected schedule on its --dp x --tp x --pp mesh
// (its JSON rows say dp, tp and pp), then in one process with as many intra-op threads as the
// mesh's ranks have together: step time, throughput and its
// limit under the simulator, measured and predicted bubble, exposed communication, peak
// activation memory measured and predicted.
#ifndef CONVEYOR_CLI_BENCH_TRAIN_H_
#define CONVEYOR_CLI_BENCH_TRAIN_H_

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace conveyor {

// Adds `train` to `bench`. `args`: this process's command line without argv[0] (ranks are
// launched with it); `exit_code` receives the command's exit status.
void AddBenchTrain(CLI::App& bench, const std::vector<std::string>& args, int* exit_code);

}  // namespace conveyor

#endif  // CONVEYOR_CLI_BENCH_TRAIN_H_
