// Where a command's output goes: a file (written whole, then renamed into place) or stdout.
#ifndef CONVEYOR_CLI_OUTPUT_H_
#define CONVEYOR_CLI_OUTPUT_H_

#include <string>

namespace conveyor::cli {

// Writes `text` to `path`, or to stdout when `path` is empty or "-". Throws UserError
// naming the path when it cannot be written.
void WriteOutput(const std::string& path, const std::string& text);

}  // namespace conveyor::cli

#endif  // CONVEYOR_CLI_OUTPUT_H_
