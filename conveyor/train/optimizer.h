// AdamW over named parameters, and the learning-rate schedule (linear warm-up, then cosine
// decay to a floor).
//
// AdamW (Loshchilov & Hutter, 2019): decoupled weight decay, bias-corrected moments. The
// state of each parameter (exp_avg, exp_avg_sq) lives under the parameter's global name, so
// a checkpoint can be resharded across any partition. Copies of one parameter (tied weights,
// DualPipe's two model copies) given the same gradient get the same update and stay equal.
//
// Not thread-safe; one optimizer per rank.
#ifndef CONVEYOR_TRAIN_OPTIMIZER_H_
#define CONVEYOR_TRAIN_OPTIMIZER_H_

#include <map>
#include <string>

#include "conveyor/module/stage_module.h"

namespace conveyor {

struct AdamWOptions {
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;  // applied to tensors of two or more dimensions only
};

class AdamW {
 public:
  explicit AdamW(AdamWOptions options) : options_(options) {}

  // One update of every parameter with a gradient, at learning rate `lr`. `step` counts
  // updates from 1. Each copy under one name keeps its own state (equal for equal inputs).
  void Step(const NamedTensors& params, double lr, int64_t step);

  // Optimizer state by "<name>/exp_avg" and "<name>/exp_avg_sq"; the first copy of a name.
  std::map<std::string, at::Tensor> State() const;
  // Restores state for the parameters in `params` from `state`. Throws UserError naming the
  // first missing or mis-shaped entry; loads nothing then.
  void LoadState(const NamedTensors& params, const std::map<std::string, at::Tensor>& state);

 private:
  struct Moments {
    at::Tensor exp_avg, exp_avg_sq;
  };
  AdamWOptions options_;
  // Keyed by the parameter's storage: copies under one name have their own moments.
  std::map<const void*, Moments> moments_;
  std::map<const void*, std::string> names_;
};

struct LrSchedule {
  double lr = 3e-3;
  double min_lr_ratio = 0.1;  // floor of the cosine, as a fraction of lr
  int64_t warmup_steps = 10;
  int64_t total_steps = 100;

  // The rate of update `step` (1-based).
  double At(int64_t step) const;
};

}  // namespace conveyor

#endif  // CONVEYOR_TRAIN_OPTIMIZER_H_
