#include "conveyor/nn/linear.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/custom_function.h>

#include "conveyor/device/compute_precision.h"
#include "conveyor/module/weight_grad_store.h"
#include "conveyor/nn/weight_cast.h"

namespace conveyor {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// x (N, in), g (N, out) -> (out, in), added into weight's gradient in weight's dtype.
void AccumulateWeightGrad(at::Tensor weight, const at::Tensor& x2d, const at::Tensor& g2d) {
  at::NoGradGuard no_grad;
  at::Tensor grad = g2d.t().mm(x2d).to(weight.scalar_type());
  if (weight.grad().defined()) {
    weight.mutable_grad().add_(grad);
  } else {
    weight.mutable_grad() = grad;
  }
}

// The autograd function of Linear; `bias` may be undefined only through Forward below, as
// custom functions do not take undefined tensors.
struct LinearFunction : public torch::autograd::Function<LinearFunction> {
  // Under autocast (mixed precision) x, weight and bias are cast to its dtype for the
  // product (x's cast is saved for backward; the weight is cast again there, or read from
  // the cache of casts: weight_cast.h); the output stays in that dtype.
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                            bool has_bias, const at::Tensor& bias_or_weight) {
    const std::optional<c10::ScalarType> autocast = AutocastDtype(x.device().type());
    const c10::ScalarType compute = autocast.value_or(x.scalar_type());
    const at::Tensor xc = x.to(compute), wc = CastWeight(weight, compute);
    const at::Tensor bias = has_bias ? bias_or_weight.to(compute) : at::Tensor();
    ctx->save_for_backward({xc});
    ctx->saved_data["weight"] = weight;
    ctx->saved_data["input_dtype"] = x.scalar_type();
    ctx->saved_data["has_bias"] = has_bias;
    RecordWeightGradStore(ctx);
    return at::linear(xc, wc, bias);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const at::Tensor x = ctx->get_saved_variables()[0];  // in the compute dtype
    const at::Tensor weight = ctx->saved_data["weight"].toTensor();
    const at::Tensor wc = CastWeight(weight, x.scalar_type());
    const at::Tensor g = grad_outputs[0].to(x.scalar_type());
    const int64_t in = weight.size(1), out = weight.size(0);
    const at::Tensor x2d = x.reshape({-1, in});
    const at::Tensor g2d = g.reshape({-1, out});

    at::Tensor grad_x = g.matmul(wc).to(ctx->saved_data["input_dtype"].toScalarType());
    at::Tensor grad_bias;
    if (ctx->saved_data["has_bias"].toBool()) {
      grad_bias = grad_outputs[0].reshape({-1, out}).sum(at::IntArrayRef{0}, /*keepdim=*/false,
                                                         weight.scalar_type());
    }
    const at::Tensor grad_weight = WeightGradOrDefer(ctx, weight, x2d, g2d);
    // The unused slot of an absent bias is the weight again: no gradient for it.
    return {grad_x, grad_weight, at::Tensor(), grad_bias};
  }
};

}  // namespace

void RecordWeightGradStore(AutogradContext* ctx) {
  ctx->saved_data["store"] = reinterpret_cast<int64_t>(WeightGradStore::RecordingStore());
  ctx->saved_data["key"] = static_cast<int64_t>(WeightGradStore::RecordingKey());
}

at::Tensor WeightGradOrDefer(AutogradContext* ctx, const at::Tensor& weight, const at::Tensor& x2d,
                             const at::Tensor& g2d) {
  if (!weight.requires_grad()) return at::Tensor();  // frozen (a LoRA base): no gradient
  auto* store = reinterpret_cast<WeightGradStore*>(ctx->saved_data["store"].toInt());
  const int key = static_cast<int>(ctx->saved_data["key"].toInt());
  if (store != nullptr && store->deferring(key)) {
    store->Add(key, [weight, x2d, g2d] { AccumulateWeightGrad(weight, x2d, g2d); });
    return at::Tensor();
  }
  return g2d.t().mm(x2d).to(weight.scalar_type());
}

at::Tensor Linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  return LinearFunction::apply(x, weight, bias.defined(), bias.defined() ? bias : weight);
}

}  // namespace conveyor
