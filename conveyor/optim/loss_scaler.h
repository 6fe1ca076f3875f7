// LossScaler: dynamic loss scaling for fp16 training (Micikevicius et al., "Mixed Precision
// Training", ICLR 2018). The last stage seeds its backward with the scale instead of 1, so
// small gradients stay within fp16's range in the half-precision backward; the trainer
// divides the gradients by the scale before clipping and the update. A step whose gradients
// overflowed (the global norm is NaN or infinite) is skipped and the scale halved; after
// `window` steps in a row without overflow it doubles. The scale is a power of two times the
// initial one, so scaling and unscaling fp32 gradients is exact.
//
// The scale never drops below 1: gradients that overflow unscaled are not a matter of
// scaling (ShouldBackOff says so, and the trainer treats them as any non-finite step).
// Every rank of a run sees the same global norm, so every rank's scaler moves alike.
// Pure (no torch); not thread-safe.
#ifndef CONVEYOR_OPTIM_LOSS_SCALER_H_
#define CONVEYOR_OPTIM_LOSS_SCALER_H_

#include <cstdint>

namespace conveyor {

class LossScaler {
 public:
  // The largest scale: the largest power of two an fp32 loss can be seeded with.
  static constexpr double kMaxScale = 0x1p127;

  // Off: scale() is 1 and nothing moves.
  LossScaler() = default;
  // Starts at `initial` (>= 1) and doubles after `window` (>= 1) good steps in a row.
  // UserError naming the bad value otherwise.
  LossScaler(double initial, int64_t window);

  bool enabled() const { return enabled_; }
  double scale() const { return scale_; }
  // Steps without overflow since the scale last changed.
  int64_t good_steps() const { return good_steps_; }

  // Whether a step with non-finite gradients at this scale is an overflow to back off from
  // (enabled, and the scale can still halve), rather than a failure.
  bool ShouldBackOff() const { return enabled_ && scale_ > 1; }
  // An overflowed step: halves the scale (not below 1) and restarts the count.
  void BackOff();
  // A step taken: counts it, and doubles the scale after `window` of them.
  void Grow();

  // Continues from a checkpoint's state. UserError for a scale < 1 or a negative count.
  void Restore(double scale, int64_t good_steps);

 private:
  bool enabled_ = false;
  double scale_ = 1;
  int64_t window_ = 0;
  int64_t good_steps_ = 0;
};

}  // namespace conveyor

#endif  // CONVEYOR_OPTIM_LOSS_SCALER_H_
