#include "conveyor/data/text_documents.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "conveyor/common/error.h"
#include "conveyor/common/input_path.h"
#include "conveyor/common/text.h"

namespace conveyor {
namespace {

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

bool IsBlank(std::string_view line) {
  return line.find_first_not_of(" \t\r") == std::string_view::npos;
}

// Throws UserError naming `where` and the byte when `text` is not valid UTF-8.
void CheckUtf8(std::string_view text, const std::string& where) {
  const std::optional<size_t> bad = FirstInvalidUtf8(text);
  CONVEYOR_CHECK(!bad) << where << ": not valid UTF-8 at byte " << *bad << " of the document (0x"
                       << std::hex << static_cast<int>(static_cast<unsigned char>(text[*bad]))
                       << ")";
}

}  // namespace

int64_t ForEachDocument(const std::string& path, const TextDocumentOptions& options,
                        const std::function<void(std::string_view)>& visit) {
  CheckInputPath("--input", path, PathKind::kFile);
  std::ifstream in(path, std::ios::binary);
  CONVEYOR_CHECK(in.is_open()) << "cannot read " << path << ": " << std::strerror(errno);
  const bool json = !options.json_key.empty() || EndsWith(path, ".jsonl");
  const std::string key = options.json_key.empty() ? "text" : options.json_key;
  int64_t documents = 0;
  std::string line, block;
  int64_t line_number = 0, block_start = 0;
  auto emit = [&](std::string_view document, const std::string& where) {
    CheckUtf8(document, where);
    visit(document);
    ++documents;
  };
  auto at_line = [&](int64_t number) { return path + ", line " + std::to_string(number); };
  if (!json && !options.blank_line_blocks) {
    const std::string whole{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    CONVEYOR_CHECK(!in.bad()) << "cannot read " << path << ": " << std::strerror(errno);
    emit(whole, path);
    return documents;
  }
  while (std::getline(in, line)) {
    ++line_number;
    if (json) {
      if (IsBlank(line)) continue;
      nlohmann::json object;
      try {
        object = nlohmann::json::parse(line);
      } catch (const nlohmann::json::exception& e) {
        CONVEYOR_CHECK(false) << at_line(line_number) << ": not JSON (" << e.what() << ")";
      }
      CONVEYOR_CHECK(object.is_object() && object.contains(key))
          << at_line(line_number) << ": no \"" << key << "\" in this line's object";
      CONVEYOR_CHECK(object[key].is_string()) << at_line(line_number) << ": \"" << key << "\" is "
                                              << object[key].type_name() << ", not a string";
      emit(object[key].get_ref<const std::string&>(), at_line(line_number));
    } else if (IsBlank(line)) {
      if (!block.empty()) emit(block, at_line(block_start));
      block.clear();
    } else {
      if (block.empty()) block_start = line_number;
      if (!block.empty()) block += '\n';
      if (!line.empty() && line.back() == '\r') line.pop_back();
      block += line;
    }
  }
  CONVEYOR_CHECK(!in.bad()) << "cannot read " << path << ": " << std::strerror(errno);
  if (!block.empty()) emit(block, at_line(block_start));
  return documents;
}

}  // namespace conveyor
