// `conveyor eval`: the mean next-token cross-entropy and perplexity of a language model over a
// data set, with exact semantics (data/token_windows.h): the model of --model (gpt, llama or
// a Hugging Face folder, with train's model flags) or of the checkpoint --resume names (its
// model configuration read from it), on a mesh of --dp x --tp x --pp ranks under any
// --schedule; --data's documents in order as one byte stream, windows of --seq-len, --batch-size
// windows a batch. Prints the result, or with --format json only
// {"tokens": N-1, "loss": ..., "perplexity": ...} on stdout.
#ifndef CONVEYOR_CLI_EVAL_COMMAND_H_
#define CONVEYOR_CLI_EVAL_COMMAND_H_

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace conveyor {

// `args`: this process's command line without argv[0] (ranks are launched with it).
// `exit_code` receives the command's exit status (the launcher's, or a rank's).
void AddEvalCommand(CLI::App& app, const std::vector<std::string>& args, int* exit_code);

}  // namespace conveyor

#endif  // CONVEYOR_CLI_EVAL_COMMAND_H_
