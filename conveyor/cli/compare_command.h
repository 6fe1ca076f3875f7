// `conveyor compare`: every schedule on the same pipeline and costs, one row each.
#ifndef CONVEYOR_CLI_COMPARE_COMMAND_H_
#define CONVEYOR_CLI_COMPARE_COMMAND_H_

#include <CLI/CLI.hpp>

namespace conveyor::cli {

void AddCompareCommand(CLI::App& app);

}  // namespace conveyor::cli

#endif  // CONVEYOR_CLI_COMPARE_COMMAND_H_
