// `conveyor compare`: every schedule on the same pipeline and costs, one row each. Costs
// are those of one rank's share of the model (1/p); a schedule with v chunks per rank runs
// stages of 1/v of that cost, so the rows compare the same model.
#ifndef CONVEYOR_CLI_COMPARE_COMMAND_H_
#define CONVEYOR_CLI_COMPARE_COMMAND_H_

#include <CLI/CLI.hpp>

namespace conveyor {

void AddCompareCommand(CLI::App& app);

}  // namespace conveyor

#endif  // CONVEYOR_CLI_COMPARE_COMMAND_H_
