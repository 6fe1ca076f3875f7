// Supervised fine-tuning data: JSON Lines of examples, each one document whose tokens say
// which of them the model learns (its targets, the loss mask), for `conveyor data prepare
// --supervised`. One JSON object a line (blank lines skipped), either
//
//   {"prompt": "...", "completion": "..."}
//     tokens: BOS (when the tokenizer has one), the prompt's, the completion's, then the
//     end-of-document id; targets: the completion's tokens and the end of document.
//
//   {"messages": [{"role": "system", "content": "..."}, {"role": "user", ...},
//                 {"role": "assistant", ...}, ...]}   with a chat template (Llama 2's):
//     an optional system message first, then user and assistant turns in turn, ending with
//     an assistant's. Each user turn opens with BOS, then "[INST] " (the first also holds
//     "<<SYS>>\n" system "\n<</SYS>>\n\n"), the user's text, " [/INST]"; each assistant turn
//     is " " its text " " then EOS. Texts are stripped of surrounding whitespace. Targets:
//     every assistant turn's tokens and its EOS.
//
// Each piece of text is tokenized on its own (a SentencePiece model puts its word-start
// mark before each), as torchtune tokenizes messages, so that the targets' boundaries are
// exact. Memory holds one line at a time.
//
// Thread-safety: pure functions; `visit` runs on the calling thread.
#ifndef CONVEYOR_DATA_SUPERVISED_DOCUMENTS_H_
#define CONVEYOR_DATA_SUPERVISED_DOCUMENTS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "conveyor/data/tokenizer.h"

namespace conveyor {

enum class ChatTemplate { kNone, kLlama2 };

// "none" or "llama2". Throws UserError naming the text otherwise.
ChatTemplate ParseChatTemplate(const std::string& text);

// One example as the pieces its tokens are made of, before tokenization.
struct SupervisedPiece {
  enum class Kind { kText, kBos, kEos, kEndOfDocument };
  Kind kind = Kind::kText;
  std::string text;     // kText only
  bool target = false;  // whether its tokens are targets
  std::string what;     // for messages: "completion", "message 3 (assistant)", ...
};

struct SupervisedDocument {
  std::string where;       // "FILE, line N"
  int64_t line_bytes = 0;  // the line's size in the file, newline included
  std::vector<SupervisedPiece> pieces;
};

// Reads the examples of the JSON Lines file at `path`, calling visit(document) for each in
// order; returns how many there were. Throws UserError naming the file and line for a file
// that cannot be read, a line that is not a JSON object, an object without a string
// "prompt" or "completion" (or, with a template, neither those nor "messages"), messages
// without a template, a role other than system, user and assistant, turns out of order,
// and text that is not valid UTF-8.
int64_t ForEachSupervisedDocument(const std::string& path, ChatTemplate chat_template,
                                  const std::function<void(SupervisedDocument&&)>& visit);

// A document's tokens and, for each, 1 when it is a target, 0 when not.
struct MaskedTokens {
  std::vector<int64_t> tokens;
  std::vector<int64_t> targets;
};

// Tokenizes `document`. Throws UserError naming document.where for a target piece that
// tokenizes to no token (an empty completion), and for a template that needs BOS and EOS ids
// the tokenizer lacks.
MaskedTokens EncodeSupervised(const Tokenizer& tokenizer, const SupervisedDocument& document);

}  // namespace conveyor

#endif  // CONVEYOR_DATA_SUPERVISED_DOCUMENTS_H_
