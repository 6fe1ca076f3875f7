// One stage of a pipeline: a part of the model plus what its backward needs.
//
// Forward caches, per micro-batch, the stage input (as an autograd leaf) and the output (on
// a last stage: the scaled loss). BackwardInput runs autograd from there with the stage's
// WeightGradStore deferring, returns the gradient of the input and drops the cache; the
// deferred weight work waits for BackwardWeight. Backward does both at once.
//
// Memory: once the runtime has handed the output to the transport, ReleaseOutput drops the
// cached output's data and keeps only its autograd history (Megatron's deallocation of
// pipeline outputs): the next stage has its own copy and backward does not need it. With
// recompute on, Forward runs without autograd and keeps only the stage input; the backward
// runs the forward again with autograd first (full activation recomputation), which gives the
// same gradients at the price of one more forward.
//
// A stage is used by one thread at a time (its rank's executor).
#ifndef CONVEYOR_RUNTIME_STAGE_H_
#define CONVEYOR_RUNTIME_STAGE_H_

#include <ATen/core/Tensor.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "conveyor/module/auxiliary_loss.h"
#include "conveyor/module/microbatch.h"
#include "conveyor/module/stage_module.h"
#include "conveyor/module/weight_grad_store.h"

namespace conveyor {

class Stage {
 public:
  Stage(int index, bool is_first, bool is_last, std::unique_ptr<StageModule> module);

  int index() const { return index_; }
  bool is_first() const { return is_first_; }
  bool is_last() const { return is_last_; }
  StageModule& module() { return *module_; }

  // Returns the output to hand to the next stage (detached), or an undefined tensor on a
  // last stage, which keeps the loss instead.
  at::Tensor Forward(const MicroBatch& mb, const at::Tensor& input);
  // grad_output: gradient of this stage's output (undefined on a last stage). Returns the
  // gradient of the input (undefined on a first stage). Each micro-batch: Forward once, then
  // Backward, or BackwardInput then BackwardWeight; anything else is an InternalError (a
  // program the verifier should have refused).
  at::Tensor BackwardInput(const MicroBatch& mb, const at::Tensor& grad_output);
  void BackwardWeight(const MicroBatch& mb);
  at::Tensor Backward(const MicroBatch& mb, const at::Tensor& grad_output);

  // Drops the data of micro-batch mb's cached output (not on a last stage, nor for a
  // micro-batch without forward state: then it does nothing).
  void ReleaseOutput(int microbatch);

  // Recompute the forward at backward time instead of keeping its activations. Change it
  // only between steps.
  void set_recompute(bool recompute) { recompute_ = recompute; }
  bool recompute() const { return recompute_; }

  // The dtype of the module's matrix products: every forward (training, recomputed,
  // inference) runs under autocast with it (ComputePrecisionGuard) for the input's device
  // type; at::kFloat (the default) leaves autocast off. Parameters, gradients and the loss
  // stay in their own dtype. Change it only between steps.
  void set_compute_dtype(c10::ScalarType dtype) { compute_dtype_ = dtype; }

  // The dtype of what crosses to the neighbouring stages: the output Forward and Infer hand
  // on (not a last stage's) and the input gradient the backward returns are cast to it; an
  // input or output gradient received in another floating dtype is widened to the model's
  // fp32 before use, so the module computes as without the cast. at::kFloat by default;
  // at::kBFloat16 / at::kHalf halve the bytes of every message (--dtype bf16 / fp16).
  // Change it only between steps.
  void set_message_dtype(c10::ScalarType dtype) { message_dtype_ = dtype; }

  // A last stage seeds its backward with `scale` instead of 1 (dynamic loss scaling,
  // loss_scaler.h): every gradient of the step is `scale` times the true one, the loss is
  // not. 1 by default. Change it only between steps.
  void set_loss_scale(double scale) { loss_scale_ = scale; }

  // Forward without autograd and without caching (evaluation, generation). Returns the
  // output; on a last stage also adds the scaled loss to loss() when mb has targets.
  at::Tensor Infer(const MicroBatch& mb, const at::Tensor& input);

  // Sum of this step's scaled micro-batch losses (last stage); reset by ResetStep().
  // Reads the device once (the losses are summed there, without a host wait per micro-batch).
  double loss() const;
  // This step's auxiliary losses (auxiliary_loss.h) by name, each the sum over its
  // micro-batches of share x term: counted once per micro-batch even when recomputed; reset
  // by ResetStep(). Their gradients are already in the backward.
  std::map<std::string, double> auxiliary_losses() const { return auxiliary_.Values(); }
  // Micro-batches whose activations are held (forward done, backward-for-inputs not).
  size_t held() const { return cache_.size(); }
  // Micro-batches with deferred weight work queued.
  size_t pending_weight_work() const { return store_.pending(); }
  void ResetStep();

 private:
  struct Cached {
    at::Tensor input;   // autograd leaf (undefined on a first stage); the plain input when
                        // recomputing
    at::Tensor output;  // output, or the scaled loss on a last stage; undefined when recomputing
  };
  // The module's forward from `input` under a WeightGradStore recording of mb and an
  // AuxiliaryLosses one (counting the terms' values unless `recomputing`): the output, or the
  // scaled loss on a last stage.
  at::Tensor RunForward(const MicroBatch& mb, const at::Tensor& input, bool recomputing);
  at::Tensor RunBackward(const MicroBatch& mb, const at::Tensor& grad_output, bool defer);

  void AddLoss(const at::Tensor& scaled);  // adds a scaled micro-batch loss to loss_

  int index_;
  bool is_first_;
  bool is_last_;
  std::unique_ptr<StageModule> module_;
  WeightGradStore store_;
  AuxiliaryLosses auxiliary_;
  std::map<int, Cached> cache_;
  std::set<int> awaiting_weight_;  // micro-batches whose I ran and W not yet
  at::Tensor loss_;  // () double on the stage's device; undefined before the first loss
  bool recompute_ = false;
  c10::ScalarType compute_dtype_ = c10::ScalarType::Float;
  c10::ScalarType message_dtype_ = c10::ScalarType::Float;
  double loss_scale_ = 1;
};

}  // namespace conveyor

#endif  // CONVEYOR_RUNTIME_STAGE_H_
