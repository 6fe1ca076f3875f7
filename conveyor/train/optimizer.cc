#include "conveyor/train/optimizer.h"

#include <ATen/ATen.h>

#include <cmath>

#include "conveyor/common/error.h"

namespace conveyor {

void AdamW::Step(const NamedTensors& params, double lr, int64_t step) {
  at::NoGradGuard no_grad;
  const double bias1 = 1 - std::pow(options_.beta1, static_cast<double>(step));
  const double bias2 = 1 - std::pow(options_.beta2, static_cast<double>(step));
  for (const auto& [name, p] : params) {
    if (!p.grad().defined()) continue;
    const void* key = p.unsafeGetTensorImpl();
    Moments& m = moments_[key];
    if (!m.exp_avg.defined()) {
      m.exp_avg = at::zeros_like(p);
      m.exp_avg_sq = at::zeros_like(p);
      names_[key] = name;
    }
    const at::Tensor& g = p.grad();
    m.exp_avg.mul_(options_.beta1).add_(g, 1 - options_.beta1);
    m.exp_avg_sq.mul_(options_.beta2).addcmul_(g, g, 1 - options_.beta2);
    if (p.dim() >= 2 && options_.weight_decay > 0) p.mul_(1 - lr * options_.weight_decay);
    const at::Tensor denom = (m.exp_avg_sq / bias2).sqrt_().add_(options_.eps);
    p.addcdiv_(m.exp_avg, denom, -lr / bias1);
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
    Moments m;
    for (auto [suffix, slot] :
         {std::pair{"/exp_avg", &m.exp_avg}, {"/exp_avg_sq", &m.exp_avg_sq}}) {
      auto it = state.find(name + suffix);
      CONVEYOR_CHECK(it != state.end()) << "optimizer state lacks '" << name << suffix << "'";
      CONVEYOR_CHECK(it->second.sizes() == p.sizes())
          << "optimizer state '" << name << suffix << "' has shape " << it->second.sizes()
          << ", the parameter " << p.sizes();
      *slot = it->second.to(p.scalar_type()).clone();
    }
    loaded[p.unsafeGetTensorImpl()] = m;
    names[p.unsafeGetTensorImpl()] = name;
  }
  moments_ = std::move(loaded);
  names_ = std::move(names);
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
