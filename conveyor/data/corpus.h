// A corpus: text documents, each with a category (the file it came from).
//
// LoadFortunes reads the Debian `fortunes` collection: each fortune file holds fortunes
// separated by lines that are exactly "%"; each fortune is a document whose category is
// the file's name. LoadTextPath reads a user's own text: one file (one document) or a
// directory (every text file under it, one document each, category = file name).
//
// Order is deterministic: categories sorted by name; documents sorted by category, then by
// their place in the source (position in the file; relative path in a directory).
// Documents are never empty or whitespace-only. Paths that cannot be read (missing, a loop
// of symbolic links: common/input_path.h) and empty corpora are UserErrors naming --data and
// the path.
//
// Thread-safety: a Corpus is a plain value; the loaders share no state.
#ifndef CONVEYOR_DATA_CORPUS_H_
#define CONVEYOR_DATA_CORPUS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace conveyor {

inline constexpr char kFortunesDir[] = "/usr/share/games/fortunes";

struct Document {
  int category = 0;  // index into Corpus::categories
  std::string text;  // raw bytes
};

struct Corpus {
  std::string source;                   // the path it was loaded from, for messages
  std::vector<std::string> categories;  // sorted, unique
  std::vector<Document> documents;

  // Bytes of text in all documents.
  int64_t TotalBytes() const;
  // Documents per category, indexed like `categories`.
  std::vector<int64_t> DocumentsPerCategory() const;
};

// The fortunes of one fortune file's content, in order. A fortune is the text between "%"
// lines without its final newline; whitespace-only fortunes are dropped.
std::vector<std::string> SplitFortunes(std::string_view content);

// Every fortune file directly in `dir`: regular files only (symlinks such as `*.u8`,
// subfolders such as `off/` and the `*.dat` indexes are skipped).
Corpus LoadFortunes(const std::string& dir = kFortunesDir);

// A text file, or every regular text file under a directory, recursively. Hidden entries
// (names starting with '.'), entries that are no regular file once their links are followed
// (a loop of links, a link to nothing, a device) and binary-looking files (a NUL byte in the
// first 8000 bytes) are skipped; a single binary file is an error.
// Throws UserError (CheckInputPath, as --data) for a path that is neither a file nor a folder
// that can be read, and for more than kMaxTextBytes of text, pointing to `conveyor data
// prepare`.
inline constexpr uintmax_t kMaxTextBytes = uintmax_t{2} << 30;
Corpus LoadTextPath(const std::string& path);

// "fortunes": LoadFortunes(); anything else: LoadTextPath(source).
Corpus LoadCorpus(const std::string& source);

}  // namespace conveyor

#endif  // CONVEYOR_DATA_CORPUS_H_
