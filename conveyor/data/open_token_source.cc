#include "conveyor/data/open_token_source.h"

#include <algorithm>
#include <filesystem>
#include <vector>

#include "conveyor/common/error.h"
#include "conveyor/data/flat_token_file.h"
#include "conveyor/data/indexed_dataset.h"

namespace conveyor {

bool IsTokenSource(const std::string& path) {
  if (IsIndexedDataset(path)) return true;
  std::error_code error;
  return path.size() > 4 && path.ends_with(".bin") && std::filesystem::is_regular_file(path, error);
}

std::shared_ptr<const TokenSource> OpenTokenSource(const std::string& path) {
  CONVEYOR_CHECK(IsTokenSource(path)) << path << " is neither a data set (" << path << ".bin and "
                                      << path << ".idx) nor a token file (a .bin)";
  if (!IsIndexedDataset(path)) return std::make_shared<const FlatTokenFile>(path);
  auto data = std::make_shared<const IndexedDataset>(path);
  CONVEYOR_CHECK(data->contiguous())
      << path << ": its sequences are not stored back to back in its .bin; conveyor trains on "
      << "data sets whose .bin is their concatenation (as preprocess_data.py and conveyor data "
         "prepare write them)";
  return data;
}

void CheckEveryToken(const TokenSource& data, int64_t vocab_size) {
  constexpr int64_t kChunk = int64_t{1} << 20;
  std::vector<int64_t> tokens;
  for (int64_t offset = 0; offset < data.num_tokens(); offset += kChunk) {
    tokens.resize(std::min(kChunk, data.num_tokens() - offset));
    data.ReadStream(offset, static_cast<int64_t>(tokens.size()), tokens.data());
    data.CheckTokens(offset, tokens, vocab_size);
  }
}

}  // namespace conveyor
