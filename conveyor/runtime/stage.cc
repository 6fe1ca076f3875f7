#include "conveyor/runtime/stage.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/autograd.h>

#include "conveyor/common/error.h"
#include "conveyor/device/compute_precision.h"

namespace conveyor {

Stage::Stage(int index, bool is_first, bool is_last, std::unique_ptr<StageModule> module)
    : index_(index), is_first_(is_first), is_last_(is_last), module_(std::move(module)) {
  CONVEYOR_ASSERT(module_ != nullptr);
}

namespace {

// A received activation in the model's dtype (fp32); token ids and fp32 pass unchanged.
// Differentiable: the gradient of an input leaf received in bf16 comes back in bf16.
at::Tensor Widen(const at::Tensor& t) {
  return t.is_floating_point() && t.scalar_type() != at::kFloat ? t.to(at::kFloat) : t;
}

}  // namespace

at::Tensor Stage::RunForward(const MicroBatch& mb, const at::Tensor& input, bool recomputing) {
  const ComputePrecisionGuard precision(input.device().type(), compute_dtype_,
                                        compute_dtype_ != c10::ScalarType::Float);
  WeightGradStore::Recording recording(&store_, mb.index);
  AuxiliaryLosses::Recording auxiliary(&auxiliary_, mb.share, loss_scale_, !recomputing);
  at::Tensor out = module_->Forward(input, mb);
  return is_last_ ? module_->LossSum(out, mb) / mb.loss_denominator : out;
}

at::Tensor Stage::Forward(const MicroBatch& mb, const at::Tensor& input) {
  CONVEYOR_ASSERT(cache_.count(mb.index) == 0)
      << "stage " << index_ << " ran forward twice for micro-batch " << mb.index;
  CONVEYOR_ASSERT(input.defined()) << "stage " << index_ << " got no input";
  Cached cached;
  at::Tensor out;
  if (recompute_) {
    at::NoGradGuard no_grad;
    if (!is_first_) cached.input = input;
    out = RunForward(mb, Widen(input), /*recomputing=*/false);
  } else {
    at::Tensor in = input;
    if (!is_first_) {
      cached.input = input.detach().requires_grad_(true);
      in = Widen(cached.input);
    }
    out = RunForward(mb, in, /*recomputing=*/false);
    cached.output = out;
  }
  cache_.emplace(mb.index, std::move(cached));
  if (is_last_) {
    AddLoss(out);
    return at::Tensor();
  }
  return out.detach().to(message_dtype_);
}

void Stage::ReleaseOutput(int microbatch) {
  auto it = cache_.find(microbatch);
  if (is_last_ || it == cache_.end() || !it->second.output.defined()) return;
  // The autograd graph stays; its root's input metadata still holds the real shape, against
  // which the engine checks the gradient given at backward.
  it->second.output.set_data(at::empty({0}, it->second.output.options()));
}

at::Tensor Stage::Infer(const MicroBatch& mb, const at::Tensor& input) {
  at::NoGradGuard no_grad;
  const ComputePrecisionGuard precision(input.device().type(), compute_dtype_,
                                        compute_dtype_ != c10::ScalarType::Float);
  at::Tensor out = module_->Forward(Widen(input), mb);
  if (!is_last_) return out.to(message_dtype_);
  if (mb.targets.defined()) AddLoss(module_->LossSum(out, mb) / mb.loss_denominator);
  return out;
}

double Stage::loss() const { return loss_.defined() ? loss_.item<double>() : 0.0; }

void Stage::AddLoss(const at::Tensor& scaled) {
  const at::Tensor value = scaled.detach().to(at::kDouble);
  loss_ = loss_.defined() ? loss_ + value : value;
}

at::Tensor Stage::RunBackward(const MicroBatch& mb, const at::Tensor& grad_output, bool defer) {
  auto it = cache_.find(mb.index);
  CONVEYOR_ASSERT(it != cache_.end())
      << "stage " << index_ << " has no forward state for micro-batch " << mb.index;
  CONVEYOR_ASSERT(is_last_ || grad_output.defined())
      << "stage " << index_ << " got no output gradient for micro-batch " << mb.index;
  Cached& cached = it->second;
  store_.SetDeferring(mb.index, defer);
  try {
    if (recompute_) {  // the forward again, this time with autograd
      at::Tensor input = mb.inputs;
      if (!is_first_) input = Widen(cached.input = cached.input.detach().requires_grad_(true));
      cached.output = RunForward(mb, input, /*recomputing=*/true);
    }
    // A last stage seeds with the loss scale (1 unless loss scaling is on); another takes the
    // received gradient in its output's dtype. A first stage whose weights are all frozen (a
    // LoRA run's embedding alone) has no gradient to compute.
    if (cached.output.requires_grad()) {
      torch::autograd::backward({cached.output},
                                {is_last_ ? at::full_like(cached.output, loss_scale_)
                                          : grad_output.to(cached.output.scalar_type())});
    }
  } catch (...) {
    store_.SetDeferring(mb.index, false);
    throw;
  }
  store_.SetDeferring(mb.index, false);
  at::Tensor grad_input = is_first_ ? at::Tensor() : cached.input.grad().to(message_dtype_);
  cache_.erase(it);
  return grad_input;
}

at::Tensor Stage::BackwardInput(const MicroBatch& mb, const at::Tensor& grad_output) {
  at::Tensor grad_input = RunBackward(mb, grad_output, /*defer=*/true);
  awaiting_weight_.insert(mb.index);
  return grad_input;
}

void Stage::BackwardWeight(const MicroBatch& mb) {
  CONVEYOR_ASSERT(awaiting_weight_.erase(mb.index) == 1)
      << "stage " << index_ << " ran backward-for-weights of micro-batch " << mb.index
      << " before its backward-for-inputs";
  store_.Run(mb.index);
}

at::Tensor Stage::Backward(const MicroBatch& mb, const at::Tensor& grad_output) {
  return RunBackward(mb, grad_output, /*defer=*/false);
}

void Stage::ResetStep() {
  CONVEYOR_ASSERT(cache_.empty() && store_.pending() == 0 && awaiting_weight_.empty())
      << "stage " << index_ << " ends a step with " << cache_.size()
      << " micro-batches still held, " << awaiting_weight_.size()
      << " awaiting backward-for-weights and " << store_.pending() << " weight tasks pending";
  loss_ = at::Tensor();
  auxiliary_.Reset();
}

}  // namespace conveyor
