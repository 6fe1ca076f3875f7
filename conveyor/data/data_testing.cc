#include "conveyor/data/data_testing.h"

#include <algorithm>
#include <filesystem>

namespace conveyor {

namespace fs = std::filesystem;

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

}  // namespace conveyor
