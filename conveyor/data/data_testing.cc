#include "conveyor/data/data_testing.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "conveyor/data/indexed_dataset.h"
#include "conveyor/data/open_token_source.h"
#include "conveyor/data/sentencepiece_tokenizer.h"

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

void WriteCountingDataSet(const std::string& prefix, int64_t documents, int64_t base) {
  IndexedDatasetWriter writer(prefix, 256);
  for (int64_t j = 0; j < documents; ++j) {
    std::vector<int64_t> tokens;
    for (int64_t k = 0; k < 5 + j % 7; ++k) tokens.push_back((j * 7 + k + base) % 200);
    writer.AddDocument(tokens);
  }
  writer.Finish();
}

void WriteCountingLossMask(const std::string& prefix, int64_t documents) {
  IndexedDatasetWriter writer(LossMaskPrefix(prefix), 2, ByteDtype());
  for (int64_t j = 0; j < documents; ++j) {
    std::vector<int64_t> mask;
    for (int64_t k = 0; k < 5 + j % 7; ++k) mask.push_back((j + k) % 3 != 0 ? 1 : 0);
    writer.AddDocument(mask);
  }
  writer.Finish();
}

IndexedLmStreamOptions SmallStreamOptions(uint64_t seed) {
  IndexedLmStreamOptions o;
  o.seq_len = 8;
  o.batch_size = 4;
  o.seed = seed;
  o.split = {80, 10, 10};
  return o;
}

std::vector<std::string> ProjectTextFiles() {
  const fs::path root = fs::path(CONVEYOR_TESTDATA_DIR).parent_path();
  std::vector<std::string> files = {(root / "README.md").string()};
  for (const fs::directory_entry& entry : fs::directory_iterator(root / "docs")) {
    if (entry.path().extension() == ".md") files.push_back(entry.path().string());
  }
  std::sort(files.begin() + 1, files.end());
  return files;
}

std::string TrainTestTokenizer(const std::string& dir, int64_t vocab, const std::string& name) {
  SentencePieceTrainOptions options;
  options.inputs = ProjectTextFiles();
  options.vocab_size = vocab;
  const std::string out = dir + "/" + name;
  EXPECT_GT(TrainSentencePiece(options, out), 1000);
  return out;
}

bool HaveSpmEncode() { return std::system("spm_encode --help >/dev/null 2>&1") == 0; }

std::vector<int64_t> SpmEncode(const std::string& model, const std::string& text) {
  const std::string input = model + ".spm-input.txt";
  { std::ofstream(input, std::ios::binary) << text << "\n"; }
  const std::string command = "spm_encode --model " + model + " --output_format=id < " + input;
  FILE* pipe = popen(command.c_str(), "r");
  std::vector<int64_t> ids;
  int64_t id;
  while (pipe != nullptr && fscanf(pipe, "%ld", &id) == 1) ids.push_back(id);
  EXPECT_TRUE(pipe != nullptr && pclose(pipe) == 0) << command << " failed";
  fs::remove(input);
  return ids;
}

}  // namespace conveyor
