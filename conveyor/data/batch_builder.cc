#include "conveyor/data/batch_builder.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <utility>

#include "conveyor/common/error.h"
#include "conveyor/data/byte_tokenizer.h"

namespace conveyor {

void CheckStreamOptions(int64_t batch_size, int64_t seq_len, double held_out_fraction) {
  CONVEYOR_CHECK(batch_size >= 1) << "batch_size must be at least 1, got " << batch_size;
  CONVEYOR_CHECK(seq_len >= 1) << "seq_len must be at least 1, got " << seq_len;
  CONVEYOR_CHECK(held_out_fraction >= 0 && held_out_fraction < 1)
      << "held_out_fraction must be in [0, 1), got " << held_out_fraction;
}

BatchBuilder::BatchBuilder(int64_t batch_size, int64_t seq_len, Targets targets)
    : seq_len_(seq_len) {
  CheckStreamOptions(batch_size, seq_len, 0);
  batch_.inputs = at::zeros({batch_size, seq_len}, at::kLong);
  batch_.targets = targets == Targets::kPerToken ? at::full({batch_size, seq_len}, -1, at::kLong)
                                                 : at::full({batch_size}, -1, at::kLong);
  batch_.attention_mask = at::zeros({batch_size, seq_len}, at::kBool);
  batch_.attention_mask.select(1, 0).fill_(true);
}

void BatchBuilder::SetTokenWindow(int64_t row, std::span<const int64_t> window,
                                  std::span<const int64_t> targets,
                                  std::span<const int64_t> positions) {
  const size_t length = static_cast<size_t>(seq_len_ + 1);
  CONVEYOR_ASSERT(batch_.targets.dim() == 2 && window.size() == length &&
                  (targets.empty() || targets.size() == length) &&
                  (positions.empty() || positions.size() == length))
      << "window of " << window.size() << " tokens for seq_len " << seq_len_;
  int64_t* inputs = batch_.inputs[row].data_ptr<int64_t>();
  int64_t* row_targets = batch_.targets[row].data_ptr<int64_t>();
  std::copy(window.begin(), window.end() - 1, inputs);
  for (size_t t = 0; t + 1 < length; ++t) {
    row_targets[t] = targets.empty() || targets[t + 1] != 0 ? window[t + 1] : -1;
  }
  batch_.attention_mask[row].fill_(true);
  if (!positions.empty()) {
    if (!batch_.positions.defined()) {
      batch_.positions = at::arange(seq_len_, at::kLong).repeat({batch_.inputs.size(0), 1});
    }
    std::copy(positions.begin(), positions.end() - 1, batch_.positions[row].data_ptr<int64_t>());
  }
}

void BatchBuilder::SetWindow(int64_t row, std::string_view window) {
  SetTokenWindow(row, ByteTokenizer().Encode(window));
}

void BatchBuilder::SetExample(int64_t row, std::string_view text, int64_t label) {
  CONVEYOR_ASSERT(batch_.targets.dim() == 1 && !text.empty()) << "bad classification row";
  const int64_t length = std::min<int64_t>(seq_len_, static_cast<int64_t>(text.size()));
  int64_t* inputs = batch_.inputs[row].data_ptr<int64_t>();
  bool* mask = batch_.attention_mask[row].data_ptr<bool>();
  for (int64_t t = 0; t < length; ++t) {
    inputs[t] = ByteTokenizer::Token(text[t]);
    mask[t] = true;
  }
  batch_.targets[row].fill_(label);
}

Batch BatchBuilder::Build() && { return std::move(batch_); }

}  // namespace conveyor
