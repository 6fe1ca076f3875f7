// `conveyor generate --checkpoint DIR`: reads the model configuration from a checkpoint of a
// GPT and samples text from it, running its stages as a forward-only pipeline (GPipe
// placement, one sample) on a mesh of --dp x --tp x --pp ranks (train's flags; 1 each by
// default, whatever mesh trained the checkpoint; each rank loads its TP shard). Replica 0
// computes the text, the others receive it. Prints the prompt and its continuation once.
#ifndef CONVEYOR_CLI_GENERATE_COMMAND_H_
#define CONVEYOR_CLI_GENERATE_COMMAND_H_

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace conveyor {

// `args`: this process's command line without argv[0] (ranks are launched with it).
// `exit_code` receives the command's exit status (the launcher's, or a rank's).
void AddGenerateCommand(CLI::App& app, const std::vector<std::string>& args, int* exit_code);

}  // namespace conveyor

#endif  // CONVEYOR_CLI_GENERATE_COMMAND_H_
