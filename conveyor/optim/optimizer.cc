#include "conveyor/optim/optimizer.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <cmath>

#include "conveyor/common/error.h"

namespace conveyor {

void AdamW::Update(const AdamWOptions& options, const at::Tensor& param, const at::Tensor& grad,
                   const at::Tensor& exp_avg, const at::Tensor& exp_avg_sq, double lr, int64_t step,
                   bool decay) {
  at::NoGradGuard no_grad;
  const double bias1 = 1 - std::pow(options.beta1, static_cast<double>(step));
  const double bias2 = 1 - std::pow(options.beta2, static_cast<double>(step));
  exp_avg.mul_(options.beta1).add_(grad, 1 - options.beta1);
  exp_avg_sq.mul_(options.beta2).addcmul_(grad, grad, 1 - options.beta2);
  if (decay && options.weight_decay > 0) param.mul_(1 - lr * options.weight_decay);
  const at::Tensor denom = (exp_avg_sq / bias2).sqrt_().add_(options.eps);
  param.addcdiv_(exp_avg, denom, -lr / bias1);
}

at::Tensor AdamW::StateEntry(const std::map<std::string, at::Tensor>& state, const std::string& key,
                             const at::Tensor& param) {
  auto it = state.find(key);
  CONVEYOR_CHECK(it != state.end()) << "optimizer state lacks '" << key << "'";
  CONVEYOR_CHECK(it->second.sizes() == param.sizes())
      << "optimizer state '" << key << "' has shape " << it->second.sizes() << ", the parameter "
      << param.sizes();
  return it->second.to(param.device(), param.scalar_type(), /*non_blocking=*/false,
                       /*copy=*/true);
}

void AdamW::Step(const NamedTensors& params, double lr, int64_t step) {
  at::NoGradGuard no_grad;
  for (const auto& [name, p] : params) {
    if (!p.grad().defined()) continue;
    const void* key = p.unsafeGetTensorImpl();
    Moments& m = moments_[key];
    if (!m.exp_avg.defined()) {
      m.exp_avg = at::zeros_like(p);
      m.exp_avg_sq = at::zeros_like(p);
      names_[key] = name;
    }
    Update(options_, p, p.grad(), m.exp_avg, m.exp_avg_sq, lr, step, p.dim() >= 2);
  }
}

std::map<std::string, at::Tensor> AdamW::State() const {
  std::map<std::string, at::Tensor> state;
  for (const auto& [key, m] : moments_) {
    const std::string& name = names_.at(key);
    state.emplace(name + "/exp_avg", m.exp_avg);
    state.emplace(name + "/exp_avg_sq", m.exp_avg_sq);
  }
  return state;
}

void AdamW::LoadState(const NamedTensors& params, const std::map<std::string, at::Tensor>& state) {
  std::map<const void*, Moments> loaded;
  std::map<const void*, std::string> names;
  for (const auto& [name, p] : params) {
    const Moments m{StateEntry(state, name + "/exp_avg", p),
                    StateEntry(state, name + "/exp_avg_sq", p)};
    loaded[p.unsafeGetTensorImpl()] = m;
    names[p.unsafeGetTensorImpl()] = name;
  }
  moments_ = std::move(loaded);
  names_ = std::move(names);
}

int64_t AdamW::StateBytes() const {
  int64_t bytes = 0;
  for (const auto& [key, m] : moments_) {
    bytes += static_cast<int64_t>(m.exp_avg.nbytes() + m.exp_avg_sq.nbytes());
  }
  return bytes;
}

double LrSchedule::At(int64_t step) const {
  if (warmup_steps > 0 && step <= warmup_steps) {
    return lr * static_cast<double>(step) / static_cast<double>(warmup_steps);
  }
  const double span = static_cast<double>(std::max<int64_t>(1, total_steps - warmup_steps));
  const double progress = std::min(1.0, static_cast<double>(step - warmup_steps) / span);
  const double floor = lr * min_lr_ratio;
  return floor + 0.5 * (lr - floor) * (1 + std::cos(M_PI * progress));
}

}  // namespace conveyor
