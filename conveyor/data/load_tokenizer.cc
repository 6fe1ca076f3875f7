#include "conveyor/data/load_tokenizer.h"

#include <filesystem>

#include "conveyor/common/error.h"
#include "conveyor/data/byte_tokenizer.h"
#include "conveyor/data/sentencepiece_tokenizer.h"

namespace conveyor {
namespace {

namespace fs = std::filesystem;

// What to pass instead of a Hugging Face tokenizers tokenizer.
constexpr char kReadsSentencePieceOnly[] =
    "conveyor reads SentencePiece models only: pass --tokenizer bytes (for data already "
    "tokenized) or --tokenizer a SentencePiece tokenizer.model";

bool IsFile(const fs::path& path) {
  std::error_code error;
  return fs::is_regular_file(path, error);
}

}  // namespace

std::string FolderTokenizer(const std::string& folder, std::string_view flag) {
  const fs::path model = fs::path(folder) / "tokenizer.model";
  if (IsFile(model)) return model.string();
  CONVEYOR_CHECK(!IsFile(fs::path(folder) / "tokenizer.json"))
      << flag << " " << folder
      << " holds tokenizer.json (a Hugging Face tokenizers tokenizer) and no tokenizer.model; "
      << kReadsSentencePieceOnly;
  return "";
}

std::unique_ptr<Tokenizer> LoadTokenizer(const std::string& spec) {
  if (spec.empty() || spec == "bytes") return std::make_unique<ByteTokenizer>();
  std::error_code error;
  if (fs::is_directory(spec, error)) {  // a model folder: its tokenizer.model
    const std::string model = FolderTokenizer(spec, "tokenizer");
    CONVEYOR_CHECK(!model.empty())
        << "tokenizer " << spec << ": a folder without a tokenizer.model";
    return std::make_unique<SentencePieceTokenizer>(model);
  }
  CONVEYOR_CHECK(fs::path(spec).extension() != ".json")
      << "tokenizer " << spec << " is a Hugging Face tokenizers file, not a SentencePiece model; "
      << kReadsSentencePieceOnly;
  return std::make_unique<SentencePieceTokenizer>(spec);
}

}  // namespace conveyor
