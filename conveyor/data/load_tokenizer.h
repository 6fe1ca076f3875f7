// A tokenizer by name, as --tokenizer gives it: the byte tokenizer or a SentencePiece model
// (tokenizer.h).
#ifndef CONVEYOR_DATA_LOAD_TOKENIZER_H_
#define CONVEYOR_DATA_LOAD_TOKENIZER_H_

#include <memory>
#include <string>

#include "conveyor/data/tokenizer.h"

namespace conveyor {

// "bytes" (or "") for the byte tokenizer; otherwise the path of a SentencePiece model, or of
// a folder holding one as tokenizer.model (a Hugging Face model folder).
// Throws UserError naming `spec` when the file cannot be read or is not a model, and when
// this build has no SentencePiece.
std::unique_ptr<Tokenizer> LoadTokenizer(const std::string& spec);

}  // namespace conveyor

#endif  // CONVEYOR_DATA_LOAD_TOKENIZER_H_
