#include "conveyor/data/data_testing.h"

#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "conveyor/common/error.h"

namespace conveyor::data::testing {

namespace fs = std::filesystem;

TempDir::TempDir() {
  std::string pattern = (fs::temp_directory_path() / "conveyor-data-XXXXXX").string();
  CONVEYOR_ASSERT(mkdtemp(pattern.data()) != nullptr) << "mkdtemp failed";
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ignored;
  fs::remove_all(path_, ignored);
}

std::string TempDir::Write(const std::string& relative, const std::string& content) const {
  const fs::path file = fs::path(path_) / relative;
  fs::create_directories(file.parent_path());
  std::ofstream(file, std::ios::binary) << content;
  return file.string();
}

Corpus CorpusOf(const std::vector<std::pair<std::string, std::string>>& documents) {
  Corpus corpus;
  corpus.source = "hand-made corpus";
  for (const auto& [category, text] : documents) corpus.categories.push_back(category);
  std::sort(corpus.categories.begin(), corpus.categories.end());
  corpus.categories.erase(std::unique(corpus.categories.begin(), corpus.categories.end()),
                          corpus.categories.end());
  for (const auto& [category, text] : documents) {
    const auto it = std::lower_bound(corpus.categories.begin(), corpus.categories.end(), category);
    corpus.documents.push_back({static_cast<int>(it - corpus.categories.begin()), text});
  }
  return corpus;
}

bool FortunesInstalled() { return fs::is_directory(kFortunesDir); }

}  // namespace conveyor::data::testing
