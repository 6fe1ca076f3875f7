#include "conveyor/train/generate.h"

#include <ATen/ATen.h>

#include "conveyor/common/error.h"
#include "conveyor/data/byte_tokenizer.h"

namespace conveyor {

std::string Generate(Trainer& trainer, const std::string& prompt, int tokens, double temperature,
                     uint64_t seed, int context) {
  CONVEYOR_CHECK(tokens >= 0) << "tokens must be >= 0, got " << tokens;
  CONVEYOR_CHECK(context >= 1) << "context must be at least 1, got " << context;
  const data::ByteTokenizer tokenizer;
  std::vector<int64_t> ids = tokenizer.Encode(prompt.empty() ? std::string("\n") : prompt);
  std::vector<int64_t> out;
  for (int k = 0; k < tokens; ++k) {
    const int64_t start = std::max<int64_t>(0, static_cast<int64_t>(ids.size()) - context);
    const at::Tensor window =
        at::tensor(std::vector<int64_t>(ids.begin() + start, ids.end()), at::kLong).unsqueeze(0);
    const int64_t next = trainer.NextTokens(window, temperature, seed + k)[0].item<int64_t>();
    ids.push_back(next);
    out.push_back(next);
  }
  return tokenizer.Decode(out);
}

}  // namespace conveyor
