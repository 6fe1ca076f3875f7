#include "conveyor/runtime/synthetic_stage.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/custom_function.h>

#include <chrono>
#include <string>
#include <thread>

namespace conveyor {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// A plain sleep overshoots by 0.1-0.2 ms on a loaded machine (3-5% of a 4 ms action, which
// the fidelity bench would blame on the runtime): sleep until kYieldMargin before the end,
// then yield until it.
constexpr auto kYieldMargin = std::chrono::microseconds(300);

void Sleep(double seconds) {
  if (seconds <= 0) return;
  using Clock = std::chrono::steady_clock;
  const auto end = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(seconds));
  if (end - Clock::now() > kYieldMargin) std::this_thread::sleep_until(end - kYieldMargin);
  while (Clock::now() < end) std::this_thread::yield();
}

// y = x * weight, taking the configured times; its weight gradient can be deferred.
struct TimedScale : public torch::autograd::Function<TimedScale> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                            double f, double i, double w) {
    Sleep(f);
    ctx->save_for_backward({x});
    ctx->saved_data["weight"] = weight;
    ctx->saved_data["i"] = i;
    ctx->saved_data["w"] = w;
    ctx->saved_data["store"] = reinterpret_cast<int64_t>(WeightGradStore::RecordingStore());
    ctx->saved_data["key"] = static_cast<int64_t>(WeightGradStore::RecordingKey());
    return x * weight;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const at::Tensor x = ctx->get_saved_variables()[0];
    at::Tensor weight = ctx->saved_data["weight"].toTensor();
    const at::Tensor g = grads[0];
    Sleep(ctx->saved_data["i"].toDouble());
    const double w = ctx->saved_data["w"].toDouble();
    auto weight_grad = [x, g, w] {
      Sleep(w);
      return (x * g).sum().reshape({1});
    };
    auto* store = reinterpret_cast<WeightGradStore*>(ctx->saved_data["store"].toInt());
    const int key = static_cast<int>(ctx->saved_data["key"].toInt());
    at::Tensor grad_weight;
    if (store != nullptr && store->deferring(key)) {
      store->Add(key, [weight, weight_grad]() mutable {
        at::NoGradGuard no_grad;
        const at::Tensor gw = weight_grad();
        if (weight.grad().defined()) {
          weight.mutable_grad().add_(gw);
        } else {
          weight.mutable_grad() = gw;
        }
      });
    } else {
      grad_weight = weight_grad();
    }
    return {g * weight, grad_weight, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

class SyntheticModule : public StageModule {
 public:
  SyntheticModule(int stage, const SyntheticCosts& costs)
      : stage_(stage), costs_(costs), weight_(at::ones({1}).requires_grad_(true)) {}

  // input: (n, T) ids on a first stage, (n, T, 1) otherwise -> (n, T, 1)
  at::Tensor Forward(const at::Tensor& input, const MicroBatch& mb) override {
    at::Tensor x = input.scalar_type() == at::kLong ? input.to(at::kFloat).unsqueeze(-1) : input;
    return TimedScale::apply(x, weight_, costs_.f, costs_.i, costs_.w);
  }

  at::Tensor LossSum(const at::Tensor& output, const MicroBatch& mb) override {
    return output.sum();
  }

  NamedTensors NamedParameters() override {
    return {{"stage" + std::to_string(stage_) + ".weight", weight_}};
  }

  // The activations between synthetic stages: (n, T, 1).
  std::vector<int64_t> InputShape(const MicroBatch& mb) const override {
    return {mb.size(), mb.seq_len(), 1};
  }
  std::vector<int64_t> OutputShape(const MicroBatch& mb) const override { return InputShape(mb); }

 private:
  int stage_;
  SyntheticCosts costs_;
  at::Tensor weight_;
};

}  // namespace

std::unique_ptr<StageModule> MakeSyntheticStage(int stage, const SyntheticCosts& costs) {
  return std::make_unique<SyntheticModule>(stage, costs);
}

}  // namespace conveyor
