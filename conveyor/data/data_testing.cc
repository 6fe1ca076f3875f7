#include "conveyor/data/data_testing.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

namespace conveyor {

namespace fs = std::filesystem;

namespace {

constexpr char kPython[] = "/usr/bin/python3";

}  // namespace

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

bool PythonHasNumpy() {
  std::string command = kPython;
  command += " -c 'import numpy' >/dev/null 2>&1";
  return std::system(command.c_str()) == 0;
}

std::string RunMegatronIndexedReference(const std::string& args) {
  std::string command = kPython;
  command += " " CONVEYOR_TESTDATA_DIR "/reference/megatron_indexed.py ";
  command += args;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) {
    ADD_FAILURE() << "cannot run " << command;
    return "";
  }
  std::string out;
  std::array<char, 4096> chunk;
  while (size_t n = fread(chunk.data(), 1, chunk.size(), pipe)) out.append(chunk.data(), n);
  if (pclose(pipe) != 0) {
    ADD_FAILURE() << command << " failed";
    return "";
  }
  return out;
}

}  // namespace conveyor
