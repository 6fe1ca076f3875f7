// `conveyor data`: tokenized data sets on disk.
//
//   conveyor data prepare --input FILE... --out PREFIX [--tokenizer bytes|MODEL]
//                         [--json-key KEY] [--blank-line-blocks] [--threads N]
//     tokenizes text and JSON Lines files (data/text_documents.h) into Megatron's indexed
//     data set PREFIX.bin / PREFIX.idx (data/indexed_dataset.h), one document per sequence,
//     as DocumentTokens makes it (data/tokenizer.h: a SentencePiece model's BOS, the text,
//     its EOS; the byte tokenizer's text and a newline). Tokenizes on every core, a chunk of
//     documents at a time, written in order: memory is one chunk (about 4 MB of text a
//     thread) and the index. Progress on stderr (MB of text, MB/s, tokens); nothing under
//     PREFIX's names unless it completes.
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
