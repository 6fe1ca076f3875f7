// `conveyor train [CONFIG.toml] [--flags]`: with no arguments, a small byte-level GPT learns
// the fortunes corpus across 4 local ranks (1F1B over Gloo on 127.0.0.1), with a progress
// bar, evaluations, a summary (train_summary.h) and sample text at the end. Flags override
// the TOML file, which overrides the defaults (train_config.h). Under torchrun / srun /
// mpirun each process is one rank. `conveyor generate` is in generate_command.h.
#ifndef CONVEYOR_CLI_TRAIN_COMMAND_H_
#define CONVEYOR_CLI_TRAIN_COMMAND_H_

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace conveyor {

// `args`: this process's command line without argv[0] (ranks are launched with it).
// `exit_code` receives the command's exit status (the launcher's, or a rank's).
void AddTrainCommand(CLI::App& app, const std::vector<std::string>& args, int* exit_code);

}  // namespace conveyor

#endif  // CONVEYOR_CLI_TRAIN_COMMAND_H_
