#include "conveyor/data/load_tokenizer.h"

#include <filesystem>

#include "conveyor/common/error.h"
#include "conveyor/data/byte_tokenizer.h"
#include "conveyor/data/sentencepiece_tokenizer.h"

namespace conveyor {

std::unique_ptr<Tokenizer> LoadTokenizer(const std::string& spec) {
  if (spec.empty() || spec == "bytes") return std::make_unique<ByteTokenizer>();
  std::error_code error;
  if (std::filesystem::is_directory(spec, error)) {  // a model folder: its tokenizer.model
    const std::filesystem::path model = std::filesystem::path(spec) / "tokenizer.model";
    CONVEYOR_CHECK(std::filesystem::is_regular_file(model, error))
        << "tokenizer " << spec << ": a folder without a tokenizer.model";
    return std::make_unique<SentencePieceTokenizer>(model.string());
  }
  return std::make_unique<SentencePieceTokenizer>(spec);
}

}  // namespace conveyor
