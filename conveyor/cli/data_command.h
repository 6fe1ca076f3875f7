// `conveyor data`: tokenized data sets on disk.
//
//   conveyor data prepare --input FILE... --out PREFIX [--tokenizer bytes] [--json-key KEY]
//                         [--blank-line-blocks]
//     tokenizes text and JSON Lines files (data/text_documents.h) into Megatron's indexed
//     data set PREFIX.bin / PREFIX.idx (data/indexed_dataset.h), one document per sequence,
//     each ending with the tokenizer's end of document (the byte tokenizer has none: its
//     documents end with a newline byte). Streams: memory is one document and the index.
//     Progress on stderr (MB of text, MB/s, tokens); nothing under PREFIX's names unless it
//     completes.
//   conveyor data check PREFIX [--vocab N]
//     opens the data set, checking every structure of the index against the tokens file, and
//     with --vocab every token against [0, N); prints its counts. Exit status 1 naming the
//     first problem otherwise.
#ifndef CONVEYOR_CLI_DATA_COMMAND_H_
#define CONVEYOR_CLI_DATA_COMMAND_H_

#include <CLI/CLI.hpp>

namespace conveyor {

void AddDataCommand(CLI::App& app);

}  // namespace conveyor

#endif  // CONVEYOR_CLI_DATA_COMMAND_H_
