// `conveyor train [CONFIG.toml] [--flags]` and `conveyor generate --checkpoint DIR`.
//
// train: with no arguments, a small byte-level GPT learns the fortunes corpus across 4
// local ranks (1F1B over Gloo on 127.0.0.1), with a progress bar, evaluations, a summary
// and sample text at the end. Flags override the TOML file, which overrides the defaults
// (train_config.h). Under torchrun / srun / mpirun each process is one rank.
//
// generate: reads the model configuration from a checkpoint and samples text, running the
// stages as a forward-only pipeline over --pp ranks.
#ifndef CONVEYOR_CLI_TRAIN_COMMAND_H_
#define CONVEYOR_CLI_TRAIN_COMMAND_H_

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace conveyor::cli {

void AddTrainCommand(CLI::App& app, const std::vector<std::string>& args, int* exit_code);
void AddGenerateCommand(CLI::App& app, const std::vector<std::string>& args, int* exit_code);

}  // namespace conveyor::cli

#endif  // CONVEYOR_CLI_TRAIN_COMMAND_H_
