// `conveyor profile`: what the layer kinds of a model cost on this machine
// (train/layer_profile.h), written as the JSON that `plan --auto --costs` reads
// (cli/layer_cost_json.h), with a table of it on stdout.
#ifndef CONVEYOR_CLI_PROFILE_COMMAND_H_
#define CONVEYOR_CLI_PROFILE_COMMAND_H_

#include <CLI/CLI.hpp>

namespace conveyor {

void AddProfileCommand(CLI::App& app);

}  // namespace conveyor

#endif  // CONVEYOR_CLI_PROFILE_COMMAND_H_
