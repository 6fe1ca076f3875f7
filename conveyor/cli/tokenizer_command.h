// `conveyor tokenizer`: SentencePiece tokenizers.
//
//   conveyor tokenizer train --input FILE... --vocab-size N [--model-type bpe|unigram]
//                            --out tokenizer.model [--json-key KEY] [--max-sentences N]
//     trains a SentencePiece model on the lines of the inputs' documents
//     (data/sentencepiece_tokenizer.h: TrainSentencePiece) and writes it atomically.
//   conveyor tokenizer encode --tokenizer MODEL TEXT
//     prints TEXT's ids (comma-separated, as generate's --prompt-tokens takes them).
//   conveyor tokenizer decode --tokenizer MODEL IDS
//     prints the text of comma-separated ids.
#ifndef CONVEYOR_CLI_TOKENIZER_COMMAND_H_
#define CONVEYOR_CLI_TOKENIZER_COMMAND_H_

#include <CLI/CLI.hpp>

namespace conveyor {

void AddTokenizerCommand(CLI::App& app);

}  // namespace conveyor

#endif  // CONVEYOR_CLI_TOKENIZER_COMMAND_H_
