#include "conveyor/optim/loss_scaler.h"

#include <algorithm>
#include <cmath>

#include "conveyor/common/error.h"

namespace conveyor {

LossScaler::LossScaler(double initial, int64_t window)
    : enabled_(true), scale_(initial), window_(window) {
  CONVEYOR_CHECK(std::isfinite(initial) && initial >= 1 && initial <= kMaxScale)
      << "--loss-scale must be 0 (off) or within [1, 2^127], got " << initial;
  CONVEYOR_CHECK(window >= 1) << "--loss-scale-window must be at least 1, got " << window;
}

void LossScaler::BackOff() {
  CONVEYOR_ASSERT(enabled_) << "backing off a disabled loss scaler";
  scale_ = std::max(1.0, scale_ / 2);
  good_steps_ = 0;
}

void LossScaler::Grow() {
  if (!enabled_) return;
  if (++good_steps_ < window_) return;
  scale_ = std::min(kMaxScale, scale_ * 2);
  good_steps_ = 0;
}

void LossScaler::Restore(double scale, int64_t good_steps) {
  CONVEYOR_CHECK(std::isfinite(scale) && scale >= 1 && scale <= kMaxScale && good_steps >= 0)
      << "a loss scale of " << scale << " after " << good_steps
      << " good steps cannot be restored (the scale is within [1, 2^127])";
  scale_ = scale;
  good_steps_ = good_steps;
}

}  // namespace conveyor
