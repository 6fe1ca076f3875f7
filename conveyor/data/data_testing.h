// Test support for the data layer: scratch directories and hand-made corpora.
#ifndef CONVEYOR_DATA_DATA_TESTING_H_
#define CONVEYOR_DATA_DATA_TESTING_H_

#include <string>
#include <utility>
#include <vector>

#include "conveyor/data/corpus.h"

namespace conveyor::data::testing {

// A fresh directory, removed with everything in it on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  // Writes `content` to path()/relative, creating folders; returns the full path.
  std::string Write(const std::string& relative, const std::string& content) const;

 private:
  std::string path_;
};

// A corpus of (category, text) documents, categories indexed in sorted order.
Corpus CorpusOf(const std::vector<std::pair<std::string, std::string>>& documents);

// Whether the Debian fortunes are installed at kFortunesDir.
bool FortunesInstalled();

}  // namespace conveyor::data::testing

#endif  // CONVEYOR_DATA_DATA_TESTING_H_
