#include "conveyor/data/tokenizer.h"

#include <sstream>

#include "conveyor/common/error.h"

namespace conveyor {

std::vector<int64_t> DocumentTokens(const Tokenizer& tokenizer, std::string_view text) {
  std::vector<int64_t> tokens = PromptTokens(tokenizer, text);
  tokens.push_back(tokenizer.end_of_document());
  return tokens;
}

std::vector<int64_t> PromptTokens(const Tokenizer& tokenizer, std::string_view text) {
  if (tokenizer.bos_id() < 0 && text.empty()) return tokenizer.Encode("\n");
  std::vector<int64_t> tokens;
  if (tokenizer.bos_id() >= 0) tokens.push_back(tokenizer.bos_id());
  const std::vector<int64_t> body = tokenizer.Encode(text);
  tokens.insert(tokens.end(), body.begin(), body.end());
  return tokens;
}

std::vector<int64_t> ParseTokenIds(const std::string& text, int64_t vocab, std::string_view what) {
  std::vector<int64_t> ids;
  std::string item;
  std::istringstream in(text);
  while (in >> item) {
    std::istringstream parts(item);
    std::string part;
    while (std::getline(parts, part, ',')) {
      if (part.empty()) continue;
      size_t used = 0;
      int64_t id = -1;
      try {
        id = std::stoll(part, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      CONVEYOR_CHECK(used == part.size() && id >= 0 && id < vocab)
          << what << ": '" << part << "' is not a token id of this vocabulary (0 to " << vocab - 1
          << ")";
      ids.push_back(id);
    }
  }
  CONVEYOR_CHECK(!ids.empty()) << what << " holds no token id";
  return ids;
}

void CheckTokenizerFits(const Tokenizer& tokenizer, int64_t model_vocab, std::string_view what) {
  CONVEYOR_CHECK(tokenizer.vocab_size() <= model_vocab)
      << what << ": the tokenizer (" << tokenizer.Describe() << ") has " << tokenizer.vocab_size()
      << " ids but the model's vocabulary only " << model_vocab
      << " rows: it is not this model's tokenizer";
}

}  // namespace conveyor
