// `conveyor export --checkpoint CKPT --out DIR [--dtype D] [--shard-size BYTES]`: a Llama
// checkpoint of any mesh written as a Hugging Face model folder (train/hf_export.h). One
// process; prints the files written and their size.
#ifndef CONVEYOR_CLI_EXPORT_COMMAND_H_
#define CONVEYOR_CLI_EXPORT_COMMAND_H_

#include <CLI/CLI.hpp>

namespace conveyor {

void AddExportCommand(CLI::App& app);

}  // namespace conveyor

#endif  // CONVEYOR_CLI_EXPORT_COMMAND_H_
