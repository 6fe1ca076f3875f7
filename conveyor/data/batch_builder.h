// Fills a Batch (conveyor/module/microbatch.h) row by row from bytes, byte-level tokens
// (ByteTokenizer). Every row starts as padding: inputs 0, targets -1 (not counted) and only
// position 0 marked real, so that a model pooling over the mask never divides by zero; a
// padding row counts for nothing. Rows left unset stay padding (the tail of a last, partial
// eval batch).
//
// Thread-safety: a builder is used by one thread; the batch it builds owns its tensors.
#ifndef CONVEYOR_DATA_BATCH_BUILDER_H_
#define CONVEYOR_DATA_BATCH_BUILDER_H_

#include <cstdint>
#include <span>
#include <string_view>

#include "conveyor/module/microbatch.h"

namespace conveyor {

// Throws UserError unless batch_size >= 1, seq_len >= 1 and 0 <= held_out_fraction < 1.
void CheckStreamOptions(int64_t batch_size, int64_t seq_len, double held_out_fraction);

class BatchBuilder {
 public:
  enum class Targets { kPerToken, kPerRow };

  // An (N, T) batch of padding rows; targets (N, T) for kPerToken, (N,) for kPerRow.
  BatchBuilder(int64_t batch_size, int64_t seq_len, Targets targets);

  // Language-model row: `window` holds T + 1 tokens; inputs = window[:-1], targets =
  // window[1:], every position real. With `targets` (T + 1 entries, 1 = a target) the
  // targets it marks 0 are -1; with `positions` (T + 1, the tokens' positions in their
  // documents) the row's positions are its inputs' (the batch has positions then, 0 .. T-1
  // in the other rows). SetWindow: of bytes, one token each.
  void SetTokenWindow(int64_t row, std::span<const int64_t> window,
                      std::span<const int64_t> targets = {},
                      std::span<const int64_t> positions = {});
  void SetWindow(int64_t row, std::string_view window);

  // Classification row: the first min(T, size) bytes of `text` are real inputs, the rest
  // padding (input 0, mask false); the row's target is `label`. Precondition: text is not
  // empty, per-row targets.
  void SetExample(int64_t row, std::string_view text, int64_t label);

  // The batch; the builder must not be used afterwards.
  Batch Build() &&;

 private:
  int64_t seq_len_;
  Batch batch_;
};

}  // namespace conveyor

#endif  // CONVEYOR_DATA_BATCH_BUILDER_H_
