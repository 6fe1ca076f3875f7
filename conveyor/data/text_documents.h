// The documents of a text input file, read as a stream, for `conveyor data prepare`.
//
//   JSON Lines (a name ending in .jsonl, or any file when a JSON key is given): one JSON
//     object per line, the document its string under the key ("text" by default); empty
//     lines are skipped.
//   Plain text: the whole file is one document, or, with blank_line_blocks, each run of
//     lines between blank lines (lines of spaces and tabs count as blank) is one, its lines
//     joined with '\n' (no trailing newline).
//
// Every document must be valid UTF-8. Memory holds one document (and one line) at a time.
//
// Thread-safety: ForEachDocument is reentrant; `visit` runs on the calling thread.
#ifndef CONVEYOR_DATA_TEXT_DOCUMENTS_H_
#define CONVEYOR_DATA_TEXT_DOCUMENTS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace conveyor {

struct TextDocumentOptions {
  std::string json_key;  // "": JSON Lines for *.jsonl files (key "text"), plain text otherwise
  bool blank_line_blocks = false;
};

// Calls visit(document) for every document of the file at `path`, in order; returns how many
// there were. Throws UserError naming the file and line (and the byte, for UTF-8) for a file
// that cannot be read (as --input: a folder, a loop of links, ...: CheckInputPath), a line that is
// not a JSON object, an object without the key or whose value is not a string, and text that is not
// valid UTF-8.
int64_t ForEachDocument(const std::string& path, const TextDocumentOptions& options,
                        const std::function<void(std::string_view)>& visit);

}  // namespace conveyor

#endif  // CONVEYOR_DATA_TEXT_DOCUMENTS_H_
