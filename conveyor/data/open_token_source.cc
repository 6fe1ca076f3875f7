#include "conveyor/data/open_token_source.h"

#include <algorithm>
#include <filesystem>
#include <string>
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

std::string LossMaskPrefix(const std::string& prefix) { return prefix + "_loss_mask"; }

std::shared_ptr<const TokenSource> OpenLossMask(const std::string& path, const TokenSource& data) {
  const std::string prefix = LossMaskPrefix(path);
  if (!IsIndexedDataset(path) || !IsIndexedDataset(prefix)) return nullptr;
  auto mask = std::make_shared<const IndexedDataset>(prefix);
  CONVEYOR_CHECK(mask->contiguous())
      << prefix << ": the loss mask's sequences are not stored back to back in its .bin";
  CONVEYOR_CHECK(mask->num_documents() == data.num_documents() &&
                 mask->num_tokens() == data.num_tokens())
      << prefix << " holds " << mask->num_documents() << " documents of " << mask->num_tokens()
      << " tokens, " << path << " " << data.num_documents() << " of " << data.num_tokens()
      << ": the loss mask is not of this data set (prepare both again with data prepare "
         "--supervised)";
  for (int64_t j = 1; j < data.num_documents(); ++j) {
    CONVEYOR_CHECK(mask->DocumentOffset(j) == data.DocumentOffset(j))
        << prefix << ": document " << j << " starts at token " << mask->DocumentOffset(j)
        << ", in " << path << " at " << data.DocumentOffset(j)
        << ": the loss mask is not of this data set";
  }
  return mask;
}

void ReadLossMask(const TokenSource& mask, int64_t offset, int64_t count, int64_t* out) {
  mask.ReadStream(offset, count, out);
  for (int64_t k = 0; k < count; ++k) {
    CONVEYOR_CHECK(out[k] == 0 || out[k] == 1)
        << mask.name() << ": entry " << offset + k << " of the loss mask is " << out[k]
        << ", neither 0 nor 1";
  }
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
