#include "conveyor/data/corpus.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <utility>

#include "conveyor/common/error.h"
#include "conveyor/common/input_path.h"

namespace conveyor {
namespace {

namespace fs = std::filesystem;

// A document before categories get their indices.
struct NamedDocument {
  std::string category;
  std::string text;
};

bool IsBlank(std::string_view text) {
  return text.find_first_not_of(" \t\r\n\f\v") == std::string_view::npos;
}

// git's heuristic: a NUL byte near the start.
bool LooksBinary(std::string_view content) {
  return content.substr(0, 8000).find('\0') != std::string_view::npos;
}

// Sorted categories, and documents stably sorted by category; `documents` must already be
// in source order.
Corpus MakeCorpus(const std::string& source, std::vector<NamedDocument> documents) {
  CONVEYOR_CHECK(!documents.empty()) << "no text documents in " << source;
  std::map<std::string, int> index;
  for (const NamedDocument& d : documents) index.emplace(d.category, 0);
  Corpus corpus;
  corpus.source = source;
  for (auto& [name, i] : index) {
    i = static_cast<int>(corpus.categories.size());
    corpus.categories.push_back(name);
  }
  std::stable_sort(documents.begin(), documents.end(),
                   [&](const NamedDocument& a, const NamedDocument& b) {
                     return index.at(a.category) < index.at(b.category);
                   });
  corpus.documents.reserve(documents.size());
  for (NamedDocument& d : documents) {
    corpus.documents.push_back({index.at(d.category), std::move(d.text)});
  }
  return corpus;
}

}  // namespace

int64_t Corpus::TotalBytes() const {
  int64_t bytes = 0;
  for (const Document& d : documents) bytes += static_cast<int64_t>(d.text.size());
  return bytes;
}

std::vector<int64_t> Corpus::DocumentsPerCategory() const {
  std::vector<int64_t> counts(categories.size(), 0);
  for (const Document& d : documents) ++counts[d.category];
  return counts;
}

std::vector<std::string> SplitFortunes(std::string_view content) {
  std::vector<std::string> fortunes;
  std::string current;
  const auto flush = [&] {
    if (!current.empty() && current.back() == '\n') current.pop_back();
    if (!IsBlank(current)) fortunes.push_back(std::move(current));
    current.clear();
  };
  size_t pos = 0;
  while (pos < content.size()) {
    size_t end = content.find('\n', pos);
    if (end == std::string_view::npos) end = content.size();
    const std::string_view line = content.substr(pos, end - pos);
    if (line == "%") {
      flush();
    } else {
      current.append(line);
      current.push_back('\n');
    }
    pos = end + 1;
  }
  flush();
  return fortunes;
}

Corpus LoadFortunes(const std::string& dir) {
  CheckInputPath("--data fortunes:", dir, PathKind::kFolder);
  std::vector<fs::path> files;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir)) {
    const std::string extension = entry.path().extension().string();
    if (entry.is_symlink() || !entry.is_regular_file()) continue;
    if (extension == ".dat" || extension == ".u8") continue;
    files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  std::vector<NamedDocument> documents;
  for (const fs::path& file : files) {
    for (std::string& text : SplitFortunes(ReadInputFile("--data fortunes:", file.string()))) {
      documents.push_back({file.filename().string(), std::move(text)});
    }
  }
  return MakeCorpus(dir, std::move(documents));
}

// Refuses a text a run cannot hold whole in every rank (kMaxTextBytes in all), pointing to
// the tokenized path, which reads any size.
void CheckTextSize(const std::string& path, uintmax_t bytes) {
  CONVEYOR_CHECK(bytes <= kMaxTextBytes)
      << path << ": " << bytes / 1000000 << " MB of text is more than a run reads whole into "
      << "every rank (" << kMaxTextBytes / 1000000 << " MB); tokenize it once (conveyor data "
      << "prepare --input " << path << " --out PREFIX) and train with --data PREFIX, which "
      << "reads a data set of any size";
}

Corpus LoadTextPath(const std::string& path) {
  CheckInputPath("--data", path, PathKind::kFileOrFolder);
  std::error_code error;
  std::vector<NamedDocument> documents;
  const auto add = [&](const fs::path& file, std::string content) {
    if (!IsBlank(content)) documents.push_back({file.filename().string(), std::move(content)});
  };
  if (!fs::is_directory(path, error)) {
    CheckTextSize(path, fs::file_size(path, error));
    std::string content = ReadInputFile("--data", path);
    CONVEYOR_CHECK(!LooksBinary(content))
        << path << " looks binary (a NUL byte in its first 8000 bytes), not text";
    add(path, std::move(content));
    return MakeCorpus(path, std::move(documents));
  }
  std::vector<fs::path> files;
  // Entries that are not regular files, their links followed (a loop of links, a link to
  // nothing, a device), are skipped like binary files.
  auto it =
      fs::recursive_directory_iterator(path, fs::directory_options::skip_permission_denied, error);
  for (; !error && it != fs::recursive_directory_iterator(); it.increment(error)) {
    std::error_code unfollowed;
    if (it->path().filename().string().starts_with(".")) {
      if (it->is_directory(unfollowed)) it.disable_recursion_pending();
      continue;
    }
    if (it->is_regular_file(unfollowed)) files.push_back(it->path());
  }
  CONVEYOR_CHECK(!error) << "--data " << path << ": cannot list the folder: " << error.message();
  std::sort(files.begin(), files.end());
  uintmax_t total = 0;
  for (const fs::path& file : files) {
    const uintmax_t size = fs::file_size(file, error);
    if (!error) total += size;  // one gone since is refused as it is read
  }
  CheckTextSize(path, total);
  for (const fs::path& file : files) {
    std::string content = ReadInputFile("--data " + path + ":", file.string());
    if (!LooksBinary(content)) add(file, std::move(content));
  }
  return MakeCorpus(path, std::move(documents));
}

Corpus LoadCorpus(const std::string& source) {
  return source == "fortunes" ? LoadFortunes() : LoadTextPath(source);
}

}  // namespace conveyor
