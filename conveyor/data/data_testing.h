// Test support for the data layer: hand-made corpora (scratch folders:
// common/scratch_folder_testing.h).
#ifndef CONVEYOR_DATA_DATA_TESTING_H_
#define CONVEYOR_DATA_DATA_TESTING_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "conveyor/data/corpus.h"
#include "conveyor/data/indexed_lm_stream.h"

namespace conveyor {

// A corpus of (category, text) documents, categories indexed in sorted order.
Corpus CorpusOf(const std::vector<std::pair<std::string, std::string>>& documents);

// Whether the Debian fortunes are installed at kFortunesDir.
bool FortunesInstalled();

// Writes a data set of `documents` documents to `prefix` (vocabulary 256): document j of
// 5 + j % 7 tokens, token k of it (j * 7 + k + base) % 200.
void WriteCountingDataSet(const std::string& prefix, int64_t documents, int64_t base = 0);

// Writes the loss mask (open_token_source.h) of such a data set at `prefix`: document j's
// token k a target when (j + k) % 3 != 0.
void WriteCountingLossMask(const std::string& prefix, int64_t documents);

// Stream options for those: windows of 8 tokens, 4 a batch, split 80 / 10 / 10, `seed`.
IndexedLmStreamOptions SmallStreamOptions(uint64_t seed);

// English text of this project (README.md and docs/*.md, about 200 KB), for tokenizers.
std::vector<std::string> ProjectTextFiles();

// A SentencePiece model of `vocab` pieces (bpe) trained on ProjectTextFiles(), written to
// dir/name; its path. Fails the test when training fails.
std::string TrainTestTokenizer(const std::string& dir, int64_t vocab = 600,
                               const std::string& name = "tokenizer.model");

// Whether Debian's spm_encode (package sentencepiece) is installed.
bool HaveSpmEncode();

// The ids spm_encode gives `text` (one line, no newline in it) with the model at `model`.
std::vector<int64_t> SpmEncode(const std::string& model, const std::string& text);

}  // namespace conveyor

#endif  // CONVEYOR_DATA_DATA_TESTING_H_
