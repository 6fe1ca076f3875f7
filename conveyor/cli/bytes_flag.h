// A byte count on the command line: a plain number (1e9, 500000) or one with a unit (2GiB,
// 500MB, 64KiB; kB is 1000 bytes, KiB 1024), for every flag that takes bytes.
#ifndef CONVEYOR_CLI_BYTES_FLAG_H_
#define CONVEYOR_CLI_BYTES_FLAG_H_

#include <CLI/CLI.hpp>

namespace conveyor {

// The transform for such a flag: rewrites the value as a whole number of bytes (a plain
// number rounded), or fails naming the value when it is neither form or is negative.
CLI::Validator BytesFlag();

}  // namespace conveyor

#endif  // CONVEYOR_CLI_BYTES_FLAG_H_
