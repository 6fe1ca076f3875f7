#include "conveyor/optim/optimizer.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <cmath>

#include "conveyor/common/error.h"
#include "conveyor/device/torch_compat.h"

namespace conveyor {
namespace {

// The foreach update of `t`'s tensors [begin, end).
void ForEachUpdate(const AdamWOptions& o, const AdamWTensors& t, size_t begin, size_t end,
                   double lr, int64_t step, double weight_decay) {
  const auto part = [begin, end](const std::vector<at::Tensor>& all) {
    return at::TensorList(all).slice(begin, end - begin);
  };
  const at::TensorList params = part(t.params), grads = part(t.grads), exp_avgs = part(t.exp_avgs),
                       exp_avg_sqs = part(t.exp_avg_sqs);
  const double bias1 = 1 - std::pow(o.beta1, static_cast<double>(step));
  const double bias2 = 1 - std::pow(o.beta2, static_cast<double>(step));
  at::_foreach_mul_(exp_avgs, o.beta1);
  at::_foreach_add_(exp_avgs, grads, 1 - o.beta1);
  at::_foreach_mul_(exp_avg_sqs, o.beta2);
  at::_foreach_addcmul_(exp_avg_sqs, grads, grads, 1 - o.beta2);
  if (weight_decay > 0) at::_foreach_mul_(params, 1 - lr * weight_decay);
  std::vector<at::Tensor> denom = at::_foreach_div(exp_avg_sqs, bias2);
  at::_foreach_sqrt_(denom);
  at::_foreach_add_(denom, o.eps);
  at::_foreach_addcdiv_(params, exp_avgs, denom, -lr / bias1);
}

}  // namespace

AdamWKernel ResolveAdamWKernel(AdamWKernel kernel, c10::Device device) {
  if (kernel == AdamWKernel::kAuto) {
    if (kHasFusedAdamW) return AdamWKernel::kFused;
    // On the CPU a tensor at a time is faster: each stays in cache through the five kernels
    // (docs/BENCHMARKS.md).
    return device.is_cuda() ? AdamWKernel::kForEach : AdamWKernel::kLoop;
  }
  CONVEYOR_CHECK(kernel != AdamWKernel::kFused || kHasFusedAdamW)
      << "--adamw-kernel fused: this libtorch (" << TORCH_VERSION
      << ") has no fused AdamW kernel (2.4 and later have it); use foreach or loop";
  return kernel;
}

void AdamWTensors::Add(const at::Tensor& param, const at::Tensor& grad, const at::Tensor& exp_avg,
                       const at::Tensor& exp_avg_sq) {
  params.push_back(param);
  grads.push_back(grad);
  exp_avgs.push_back(exp_avg);
  exp_avg_sqs.push_back(exp_avg_sq);
}

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

void AdamW::UpdateAll(const AdamWOptions& options, const AdamWTensors& tensors, double lr,
                      int64_t step, bool decay) {
  const size_t n = tensors.params.size();
  if (n == 0) return;
  CONVEYOR_ASSERT(tensors.grads.size() == n && tensors.exp_avgs.size() == n &&
                  tensors.exp_avg_sqs.size() == n)
      << "AdamW over " << n << " parameters with " << tensors.grads.size() << " gradients";
  at::NoGradGuard no_grad;
  const double weight_decay = decay ? options.weight_decay : 0;
  switch (ResolveAdamWKernel(options.kernel, tensors.params.front().device())) {
    case AdamWKernel::kLoop:
      for (size_t i = 0; i < n; ++i) {
        Update(options, tensors.params[i], tensors.grads[i], tensors.exp_avgs[i],
               tensors.exp_avg_sqs[i], lr, step, decay);
      }
      return;
    case AdamWKernel::kFused:
      FusedAdamW(tensors.params, tensors.grads, tensors.exp_avgs, tensors.exp_avg_sqs, lr,
                 options.beta1, options.beta2, weight_decay, options.eps, step);
      return;
    default: {  // kForEach, by chunks
      size_t begin = 0;
      int64_t bytes = 0;
      for (size_t i = 0; i < n; ++i) {
        bytes += static_cast<int64_t>(tensors.params[i].nbytes());
        if (bytes < options.foreach_chunk_bytes && i + 1 < n) continue;
        ForEachUpdate(options, tensors, begin, i + 1, lr, step, weight_decay);
        begin = i + 1;
        bytes = 0;
      }
    }
  }
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
  AdamWTensors decayed, plain;  // weight decay on tensors of two or more dimensions
  for (const auto& [name, p] : params) {
    if (!p.grad().defined()) continue;
    const void* key = p.unsafeGetTensorImpl();
    Moments& m = moments_[key];
    if (!m.exp_avg.defined()) {
      m.exp_avg = at::zeros_like(p);
      m.exp_avg_sq = at::zeros_like(p);
      names_[key] = name;
    }
    (p.dim() >= 2 ? decayed : plain).Add(p, p.grad(), m.exp_avg, m.exp_avg_sq);
  }
  UpdateAll(options_, decayed, lr, step, true);
  UpdateAll(options_, plain, lr, step, false);
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
