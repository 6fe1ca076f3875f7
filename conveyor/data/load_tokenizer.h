// A tokenizer by name, as --tokenizer gives it: the byte tokenizer or a SentencePiece model
// (tokenizer.h); and the tokenizer a Hugging Face model folder implies.
#ifndef CONVEYOR_DATA_LOAD_TOKENIZER_H_
#define CONVEYOR_DATA_LOAD_TOKENIZER_H_

#include <memory>
#include <string>
#include <string_view>

#include "conveyor/data/tokenizer.h"

namespace conveyor {

// "bytes" (or "") for the byte tokenizer; otherwise the path of a SentencePiece model, or of
// a folder holding one as tokenizer.model (a Hugging Face model folder).
// Throws UserError naming `spec` when the file cannot be read or is not a model, and when
// this build has no SentencePiece; in one line saying what to pass instead for a Hugging
// Face tokenizers file (tokenizer.json, or a folder holding it and no tokenizer.model).
std::unique_ptr<Tokenizer> LoadTokenizer(const std::string& spec);

// The tokenizer of the Hugging Face model folder `folder`, given as `flag`: the path of its
// tokenizer.model when it has one, else "" (none: the byte tokenizer). Throws UserError, one
// line naming `flag`, the folder and what to pass instead, when it holds tokenizer.json and
// no tokenizer.model (a Hugging Face tokenizers tokenizer, as Llama 3 and Qwen ship: conveyor
// reads SentencePiece models only, and would otherwise take the model's text as bytes).
std::string FolderTokenizer(const std::string& folder, std::string_view flag);

}  // namespace conveyor

#endif  // CONVEYOR_DATA_LOAD_TOKENIZER_H_
