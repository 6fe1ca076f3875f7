#include "conveyor/module/auxiliary_loss.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include "conveyor/common/error.h"

namespace conveyor {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

thread_local const AuxiliaryLosses::Recording* current = nullptr;

// x in forward; in backward x's gradient passes and `term` gets `seed`.
struct AddToLoss : public torch::autograd::Function<AddToLoss> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& term,
                            double seed) {
    ctx->saved_data["seed"] = seed;
    ctx->saved_data["sizes"] = term.sizes().vec();
    ctx->saved_data["dtype"] = static_cast<int64_t>(term.scalar_type());
    return x;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto dtype = static_cast<at::ScalarType>(ctx->saved_data["dtype"].toInt());
    const at::Tensor seed =
        at::full(ctx->saved_data["sizes"].toIntVector(), ctx->saved_data["seed"].toDouble(),
                 grads[0].options().dtype(dtype));
    return {grads[0], seed, at::Tensor()};
  }
};

}  // namespace

AuxiliaryLosses::Recording::Recording(AuxiliaryLosses* sink, double share, double loss_scale,
                                      bool count)
    : previous_(current), sink_(sink), share_(share), loss_scale_(loss_scale), count_(count) {
  CONVEYOR_ASSERT(sink != nullptr);
  current = this;
}

AuxiliaryLosses::Recording::~Recording() { current = previous_; }

std::map<std::string, double> AuxiliaryLosses::Values() const {
  std::map<std::string, double> values;
  for (const auto& [name, sum] : sums_) values[name] = sum.item<double>();
  return values;
}

bool AuxiliaryLossesCounted() { return current != nullptr && current->count_; }

at::Tensor AttachAuxiliaryLoss(const at::Tensor& x, const at::Tensor& term,
                               const std::string& name) {
  if (current == nullptr) return x;
  CONVEYOR_ASSERT(term.defined() && term.numel() == 1)
      << "auxiliary loss '" << name << "' must be a scalar, got shape " << term.sizes();
  if (current->count_) {
    const at::Tensor value = term.detach().to(at::kDouble).reshape({}) * current->share_;
    at::Tensor& sum = current->sink_->sums_[name];
    sum = sum.defined() ? sum + value : value;
  }
  if (!at::GradMode::is_enabled() || !term.requires_grad()) return x;
  return AddToLoss::apply(x, term, current->share_ * current->loss_scale_);
}

}  // namespace conveyor
