// Auxiliary losses: terms a module adds to the training loss from inside its forward, on
// whichever stage it runs (a Mixture-of-Experts router's load-balancing loss lives in every
// MoE layer, on every stage), not only the last stage's LossSum.
//
// A module passes its activation through AttachAuxiliaryLoss(x, term, name): the result is x,
// and in backward the scalar `term` receives the gradient it would have as `share` x term
// added to the batch's loss (share: the micro-batch's part of the batch, MicroBatch::share),
// under the stage's loss scale: the backward of an identity whose gradient also flows into
// `term` (the pattern of Megatron-Core's MoEAuxLossAutoScaler). Its effect on the weights is
// therefore the same on any stage, under any schedule and split backward, with or without
// data parallelism (the shares of a data-parallel batch's micro-batches sum to 1 over every
// replica, as the main loss's denominator does), and equals that of adding the term to the
// loss in one process.
//
// The value share x term is summed by name in the AuxiliaryLosses recording it was made
// under, for the step's metrics. A forward that recomputes (activation recomputation at
// backward time) attaches the same gradient without counting the value again. Outside a
// Recording (evaluation, generation, a layer timed alone) AttachAuxiliaryLoss returns x and
// the term has no effect.
//
// Thread-safety: a Recording is per thread; an AuxiliaryLosses is used by one thread at a
// time (its stage's). The gradient's seed is fixed at forward time, so the backward may run
// on another thread.
#ifndef CONVEYOR_MODULE_AUXILIARY_LOSS_H_
#define CONVEYOR_MODULE_AUXILIARY_LOSS_H_

#include <ATen/core/Tensor.h>

#include <map>
#include <string>

namespace conveyor {

class AuxiliaryLosses {
 public:
  // While alive, AttachAuxiliaryLoss on this thread seeds term gradients with
  // loss_scale x share and, when `count`, adds share x term to `sink`'s sums. REQUIRES:
  // `sink` outlives the Recording; Recordings nest (LIFO) on one thread.
  class Recording {
   public:
    Recording(AuxiliaryLosses* sink, double share, double loss_scale, bool count);
    ~Recording();
    Recording(const Recording&) = delete;
    Recording& operator=(const Recording&) = delete;

   private:
    const Recording* previous_;
    friend at::Tensor AttachAuxiliaryLoss(const at::Tensor&, const at::Tensor&, const std::string&);
    friend bool AuxiliaryLossesCounted();
    AuxiliaryLosses* sink_;
    double share_;
    double loss_scale_;
    bool count_;
  };

  // The sums since the last Reset, by name (reads the device once per name).
  std::map<std::string, double> Values() const;
  void Reset() { sums_.clear(); }

 private:
  friend at::Tensor AttachAuxiliaryLoss(const at::Tensor&, const at::Tensor&, const std::string&);
  std::map<std::string, at::Tensor> sums_;  // () double tensors on the terms' device
};

// Whether a forward on this thread runs inside a Recording that counts: a training forward,
// not its recomputation nor an evaluation. A layer keeping statistics of its own (an MoE
// router's expert load) counts them only then, so that recomputation never counts twice.
bool AuxiliaryLossesCounted();

// x, with `term` (a scalar tensor, part of x's autograd graph or not) added to the loss as
// described above. `name` says what it is in the metrics ("load_balance").
at::Tensor AttachAuxiliaryLoss(const at::Tensor& x, const at::Tensor& term,
                               const std::string& name);

}  // namespace conveyor

#endif  // CONVEYOR_MODULE_AUXILIARY_LOSS_H_
