#include "conveyor/data/supervised_documents.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <utility>

#include "conveyor/common/error.h"
#include "conveyor/common/input_path.h"
#include "conveyor/common/text.h"

namespace conveyor {
namespace {

using Kind = SupervisedPiece::Kind;

std::string_view Strip(std::string_view s) {
  const size_t first = s.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(" \t\r\n") - first + 1);
}

// The string under `key` of `object`, UTF-8; UserError naming `where` otherwise.
const std::string& StringField(const nlohmann::json& object, const std::string& key,
                               const std::string& where) {
  CONVEYOR_CHECK(object.contains(key)) << where << ": no \"" << key << "\" in this line's object";
  const nlohmann::json& value = object[key];
  CONVEYOR_CHECK(value.is_string())
      << where << ": \"" << key << "\" is " << value.type_name() << ", not a string";
  const std::string& text = value.get_ref<const std::string&>();
  const std::optional<size_t> bad = FirstInvalidUtf8(text);
  CONVEYOR_CHECK(!bad) << where << ": \"" << key << "\" is not valid UTF-8 at byte " << *bad;
  return text;
}

SupervisedPiece Text(std::string text, bool target, std::string what) {
  return {Kind::kText, std::move(text), target, std::move(what)};
}

SupervisedPiece Special(Kind kind, bool target, std::string what) {
  return {kind, "", target, std::move(what)};
}

void PromptCompletion(const nlohmann::json& object, SupervisedDocument& document) {
  const std::string& prompt = StringField(object, "prompt", document.where);
  const std::string& completion = StringField(object, "completion", document.where);
  document.pieces = {Special(Kind::kBos, false, "prompt"), Text(prompt, false, "prompt"),
                     Text(completion, true, "completion"),
                     Special(Kind::kEndOfDocument, true, "completion")};
}

// Llama 2's chat format (see the header).
void Llama2Chat(const nlohmann::json& messages, SupervisedDocument& document) {
  const std::string& where = document.where;
  CONVEYOR_CHECK(messages.is_array() && !messages.empty())
      << where << ": \"messages\" must be a list of {\"role\", \"content\"} objects";
  std::string system;
  size_t first = 0;
  auto role_of = [&](size_t i) {
    const nlohmann::json& m = messages[i];
    const std::string at = where + ", message " + std::to_string(i + 1);
    CONVEYOR_CHECK(m.is_object()) << at << ": not a {\"role\", \"content\"} object";
    StringField(m, "content", at);
    return StringField(m, "role", at);
  };
  if (role_of(0) == "system") {
    system = std::string(Strip(messages[0]["content"].get_ref<const std::string&>()));
    first = 1;
  }
  CONVEYOR_CHECK(messages.size() > first)
      << where << ": a system message alone; a chat needs user and assistant turns after it";
  for (size_t i = first; i < messages.size(); ++i) {
    const std::string role = role_of(i);
    const bool user_turn = (i - first) % 2 == 0;
    const std::string at = "message " + std::to_string(i + 1) + " (" + role + ")";
    CONVEYOR_CHECK(role == "system" || role == "user" || role == "assistant")
        << where << ", " << at << ": role \"" << role
        << "\" is none of system, user and assistant";
    CONVEYOR_CHECK(role == (user_turn ? "user" : "assistant"))
        << where << ", " << at << ": expected a" << (user_turn ? " user" : "n assistant")
        << " turn here (an optional system message, then user and assistant in turn)";
    const std::string content(Strip(messages[i]["content"].get_ref<const std::string&>()));
    if (user_turn) {
      std::string text = "[INST] ";
      if (i == first && !system.empty()) text += "<<SYS>>\n" + system + "\n<</SYS>>\n\n";
      text += content + " [/INST]";
      document.pieces.push_back(Special(Kind::kBos, false, at));
      document.pieces.push_back(Text(std::move(text), false, at));
    } else {
      CONVEYOR_CHECK(!content.empty())
          << where << ", " << at << ": an empty assistant turn: nothing to learn from it";
      document.pieces.push_back(Text(" " + content + " ", true, at));
      document.pieces.push_back(Special(Kind::kEos, true, at));
    }
  }
  CONVEYOR_CHECK((messages.size() - first) % 2 == 0)
      << where << ": the chat ends with a user turn; its last message must be the assistant's "
      << "(what the model learns)";
}

}  // namespace

ChatTemplate ParseChatTemplate(const std::string& text) {
  if (text == "none") return ChatTemplate::kNone;
  CONVEYOR_CHECK(text == "llama2") << "--chat-template '" << text
                                   << "' is not one conveyor has: none or llama2";
  return ChatTemplate::kLlama2;
}

int64_t ForEachSupervisedDocument(const std::string& path, ChatTemplate chat_template,
                                  const std::function<void(SupervisedDocument&&)>& visit) {
  CheckInputPath("--input", path, PathKind::kFile);
  std::ifstream in(path, std::ios::binary);
  CONVEYOR_CHECK(in.is_open()) << "cannot read " << path << ": " << std::strerror(errno);
  std::string line;
  int64_t line_number = 0, documents = 0;
  while (std::getline(in, line)) {
    ++line_number;
    if (Strip(line).empty()) continue;
    SupervisedDocument document;
    document.where = path + ", line " + std::to_string(line_number);
    document.line_bytes = static_cast<int64_t>(line.size()) + 1;
    nlohmann::json object;
    try {
      object = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      CONVEYOR_CHECK(false) << document.where << ": not JSON (" << e.what() << ")";
    }
    CONVEYOR_CHECK(object.is_object()) << document.where << ": not a JSON object";
    if (object.contains("messages")) {
      CONVEYOR_CHECK(chat_template != ChatTemplate::kNone)
          << document.where << ": a \"messages\" chat needs a template to become tokens: "
          << "--chat-template llama2";
      Llama2Chat(object["messages"], document);
    } else {
      CONVEYOR_CHECK(object.contains("prompt") || object.contains("completion") ||
                     chat_template == ChatTemplate::kNone)
          << document.where << ": neither \"messages\" nor \"prompt\" and \"completion\"";
      PromptCompletion(object, document);
    }
    visit(std::move(document));
    ++documents;
  }
  CONVEYOR_CHECK(!in.bad()) << "cannot read " << path << ": " << std::strerror(errno);
  return documents;
}

MaskedTokens EncodeSupervised(const Tokenizer& tokenizer, const SupervisedDocument& document) {
  MaskedTokens out;
  auto add = [&](const std::vector<int64_t>& ids, bool target) {
    out.tokens.insert(out.tokens.end(), ids.begin(), ids.end());
    out.targets.insert(out.targets.end(), ids.size(), target ? 1 : 0);
  };
  for (const SupervisedPiece& piece : document.pieces) {
    switch (piece.kind) {
      case Kind::kText: {
        const std::vector<int64_t> ids = tokenizer.Encode(piece.text);
        CONVEYOR_CHECK(!piece.target || !ids.empty())
            << document.where << ": the " << piece.what
            << " tokenizes to no token: nothing to learn from this example";
        add(ids, piece.target);
        break;
      }
      case Kind::kBos:
      case Kind::kEos: {
        const bool bos = piece.kind == Kind::kBos;
        const int64_t id = bos ? tokenizer.bos_id() : tokenizer.eos_id();
        if (id >= 0) {
          add({id}, piece.target);
          break;
        }
        // Only a chat template needs both; a prompt goes without BOS as a document does.
        CONVEYOR_CHECK(piece.what == "prompt")
            << document.where << ": the chat template needs the tokenizer's "
            << (bos ? "BOS" : "EOS") << " id, and " << tokenizer.Describe()
            << " has none (use a SentencePiece tokenizer.model)";
        break;
      }
      case Kind::kEndOfDocument:
        add({tokenizer.end_of_document()}, piece.target);
        break;
    }
  }
  return out;
}

}  // namespace conveyor
