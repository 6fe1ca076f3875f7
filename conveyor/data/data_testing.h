// Test support for the data layer: hand-made corpora (scratch folders:
// common/scratch_folder_testing.h).
#ifndef CONVEYOR_DATA_DATA_TESTING_H_
#define CONVEYOR_DATA_DATA_TESTING_H_

#include <string>
#include <utility>
#include <vector>

#include "conveyor/data/corpus.h"

namespace conveyor {

// A corpus of (category, text) documents, categories indexed in sorted order.
Corpus CorpusOf(const std::vector<std::pair<std::string, std::string>>& documents);

// Whether the Debian fortunes are installed at kFortunesDir.
bool FortunesInstalled();

// Whether /usr/bin/python3 imports numpy (Debian's python3-numpy).
bool PythonHasNumpy();

// Runs testdata/reference/megatron_indexed.py (an independent reader and writer of Megatron's
// indexed data set) with `args`; its stdout, or "" with a test failure when it fails.
std::string RunMegatronIndexedReference(const std::string& args);

}  // namespace conveyor

#endif  // CONVEYOR_DATA_DATA_TESTING_H_
