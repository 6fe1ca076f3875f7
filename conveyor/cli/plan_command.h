// `conveyor plan`: build (or load), verify, lower, simulate and draw one schedule.
#ifndef CONVEYOR_CLI_PLAN_COMMAND_H_
#define CONVEYOR_CLI_PLAN_COMMAND_H_

#include <CLI/CLI.hpp>

namespace conveyor {

// Adds the subcommand to `app`; its callback does the work and throws conveyor::Error on
// bad input.
void AddPlanCommand(CLI::App& app);

}  // namespace conveyor

#endif  // CONVEYOR_CLI_PLAN_COMMAND_H_
