// Where a command's output goes: a file (written with AtomicFile, conveyor/common/
// atomic_file.h: whole or not at all, and never a temporary file left behind) or stdout.
#ifndef CONVEYOR_CLI_OUTPUT_H_
#define CONVEYOR_CLI_OUTPUT_H_

#include <string>

namespace conveyor {

// Writes `text` to `path`, or to stdout when `path` is empty or "-". A regular file is
// replaced atomically and durably; a device or FIFO (/dev/null, a terminal, a named pipe) is
// written directly; a folder is refused. Throws UserError naming the path and the reason
// (a full disk, a missing folder, ...) when not every byte could be written, stdout included.
void WriteOutput(const std::string& path, const std::string& text);

}  // namespace conveyor

#endif  // CONVEYOR_CLI_OUTPUT_H_
