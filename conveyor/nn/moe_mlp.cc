#include "conveyor/nn/moe_mlp.h"

#include <ATen/ATen.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

#include <cmath>
#include <utility>

#include "conveyor/common/error.h"
#include "conveyor/module/auxiliary_loss.h"
#include "conveyor/nn/layer.h"
#include "conveyor/nn/linear.h"
#include "conveyor/nn/tensor_parallel.h"
#include "conveyor/nn/transformer.h"

namespace conveyor {
namespace {

// Expert i's three weight names under `prefix`: gate, up, down.
std::vector<std::string> ExpertNames(const MoeConfig& c, const std::string& prefix, int i) {
  const std::string p = prefix + ".experts." + std::to_string(i) + ".";
  if (c.mixtral_names) return {p + "w1.weight", p + "w3.weight", p + "w2.weight"};
  return {p + "gate_proj.weight", p + "up_proj.weight", p + "down_proj.weight"};
}

}  // namespace

void CheckMoeConfig(const MoeConfig& c) {
  CONVEYOR_CHECK(c.hidden >= 1 && c.experts >= 1 && c.expert_units >= 1 && c.shared_units >= 0)
      << "an MoE block needs hidden, experts and expert units >= 1 and shared units >= 0, got "
      << c.hidden << ", " << c.experts << ", " << c.expert_units << " and " << c.shared_units;
  CONVEYOR_CHECK(c.top_k >= 1 && c.top_k <= c.experts)
      << "top-k must be within [1, experts = " << c.experts << "], got " << c.top_k;
  for (const auto& [name, value] : {std::pair{"the auxiliary loss coefficient", c.aux_loss_coef},
                                    std::pair{"the z-loss coefficient", c.z_loss_coef},
                                    std::pair{"the selection bias rate", c.bias_rate},
                                    std::pair{"the initial weights' deviation", c.init_std}}) {
    CONVEYOR_CHECK(std::isfinite(value) && value >= 0)
        << name << " must be finite and >= 0, got " << value;
  }
}

NamedShapes MoeParameterShapes(const MoeConfig& c, const std::string& prefix) {
  const int64_t h = c.hidden, f = c.expert_units, s = c.shared_units;
  NamedShapes shapes = {{prefix + ".gate.weight", {c.experts, h}}};
  for (int i = 0; i < c.experts; ++i) {
    const std::vector<std::string> names = ExpertNames(c, prefix, i);
    shapes.push_back({names[0], {f, h}});
    shapes.push_back({names[1], {f, h}});
    shapes.push_back({names[2], {h, f}});
  }
  if (s > 0) {
    shapes.push_back({prefix + ".shared_expert.gate_proj.weight", {s, h}});
    shapes.push_back({prefix + ".shared_expert.up_proj.weight", {s, h}});
    shapes.push_back({prefix + ".shared_expert.down_proj.weight", {h, s}});
    if (c.shared_gate) shapes.push_back({prefix + ".shared_expert_gate.weight", {1, h}});
  }
  return shapes;
}

MoeMlp::MoeMlp(const MoeConfig& config, const std::string& prefix, uint64_t seed,
               ParameterSpecs& specs)
    : config_(config), prefix_(prefix) {
  CheckMoeConfig(config);
  std::vector<at::Tensor> params;
  for (auto& [name, shape] : MoeParameterShapes(config, prefix)) {
    if (!config.draw_weights) {
      params.push_back(UndrawnParam(name, ParameterSpec{}, shape, TensorParallel{}, specs));
      continue;
    }
    at::Generator gen = TensorInitGenerator(seed, name);
    params.push_back(ShardParam(name, ParameterSpec{}, NormalParam(gen, shape, config.init_std),
                                TensorParallel{}, specs));
  }
  size_t next = 0;
  router_ = params[next++];
  for (int i = 0; i < config.experts; ++i) {
    gate_.push_back(params[next++]);
    up_.push_back(params[next++]);
    down_.push_back(params[next++]);
  }
  if (config.shared_units > 0) {
    shared_gate_proj_ = params[next++];
    shared_up_ = params[next++];
    shared_down_ = params[next++];
    if (config.shared_gate) shared_gate_ = params[next++];
  }
  bias_ = at::zeros({config.experts}, at::kFloat);
  load_ = at::zeros({config.experts}, at::kLong);
}

NamedTensors MoeMlp::NamedParameters() const {
  NamedTensors named;
  const NamedShapes shapes = MoeParameterShapes(config_, prefix_);
  std::vector<at::Tensor> params = {router_};
  for (int i = 0; i < config_.experts; ++i) {
    params.insert(params.end(), {gate_[i], up_[i], down_[i]});
  }
  if (config_.shared_units > 0) {
    params.insert(params.end(), {shared_gate_proj_, shared_up_, shared_down_});
    if (config_.shared_gate) params.push_back(shared_gate_);
  }
  for (size_t i = 0; i < shapes.size(); ++i) named.push_back({shapes[i].first, params[i]});
  return named;
}

at::Tensor MoeMlp::Expert(const at::Tensor& x, const at::Tensor& gate, const at::Tensor& up,
                          const at::Tensor& down) {
  return Linear(at::silu(Linear(x, gate, {})) * Linear(x, up, {}), down, {});
}

at::Tensor MoeMlp::Forward(const at::Tensor& x) {
  const int64_t n = x.size(0), t = x.size(1), c = x.size(2), tokens = n * t;
  const int64_t e = config_.experts, k = config_.top_k;
  const at::Tensor flat = x.reshape({tokens, c});  // (N, C)
  at::Tensor logits;  // (N, E) in fp32: autocast's dispatch skipped for the router's product
  {
    const c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
    logits = at::matmul(flat.to(at::kFloat), router_.t());
  }
  const at::Tensor scores =
      config_.scoring == RouterScoring::kSoftmax ? at::softmax(logits, -1) : at::sigmoid(logits);
  const at::Tensor bias = bias_.to(scores.device());
  const at::Tensor chosen = std::get<1>((scores.detach() + bias).topk(k, -1));  // (N, k)
  at::Tensor gates = scores.gather(1, chosen);                                  // (N, k)
  if (config_.renormalize) gates = gates / (gates.sum(-1, true) + 1e-20);

  // Tokens sorted by expert: row r of `sorted` is token token_of[r]'s copy for the expert
  // of its slot order[r].
  const at::Tensor slots = chosen.reshape({tokens * k});  // (N k) expert of each slot
  const at::Tensor order = std::get<1>(
      slots.sort(/*stable=*/c10::optional<bool>(true), /*dim=*/0, /*descending=*/false));
  const at::Tensor token_of = at::floor_divide(order, k);
  const at::Tensor counts = at::bincount(slots, {}, e).cpu();  // (E)
  const at::Tensor sorted = flat.index_select(0, token_of);    // (N k, C)
  std::vector<at::Tensor> outputs;
  int64_t begin = 0;
  const int64_t* count = counts.data_ptr<int64_t>();
  for (int64_t i = 0; i < e; ++i) {
    if (count[i] == 0) continue;
    outputs.push_back(Expert(sorted.narrow(0, begin, count[i]), gate_[i], up_[i], down_[i]));
    begin += count[i];
  }
  const at::Tensor expert_out = at::cat(outputs);  // (N k, C)
  const at::Tensor weighted =
      expert_out *
      gates.reshape({tokens * k}).index_select(0, order).unsqueeze(1).to(expert_out.scalar_type());
  at::Tensor y = at::zeros({tokens, c}, weighted.options()).index_add(0, token_of, weighted);
  if (config_.shared_units > 0) {
    at::Tensor shared = Expert(flat, shared_gate_proj_, shared_up_, shared_down_);
    if (config_.shared_gate) shared = shared * at::sigmoid(Linear(flat, shared_gate_, {}));
    y = y + shared;
  }
  y = y.reshape({n, t, c});

  if (AuxiliaryLossesCounted()) load_ += counts;
  if (config_.aux_loss_coef > 0) {
    const at::Tensor probs = config_.scoring == RouterScoring::kSoftmax
                                 ? scores
                                 : scores / (scores.sum(-1, true) + 1e-20);
    const at::Tensor f = counts.to(probs.device(), at::kFloat) / static_cast<double>(tokens);
    const at::Tensor p = probs.mean(0);  // (E)
    y = AttachAuxiliaryLoss(y, config_.aux_loss_coef * e * (f * p).sum(), "load_balance");
  }
  if (config_.z_loss_coef > 0) {
    y = AttachAuxiliaryLoss(y, config_.z_loss_coef * logits.logsumexp(-1).square().mean(),
                            "router_z");
  }
  return y;
}

void MoeMlp::ResetLoad() { load_.zero_(); }

void MoeMlp::UpdateSelectionBias(const at::Tensor& load) {
  CONVEYOR_ASSERT(config_.bias_rate > 0) << "a selection bias update without a rate";
  const at::Tensor l = load.to(at::kFloat).cpu();
  bias_ += config_.bias_rate * at::sign(l.mean() - l);
}

}  // namespace conveyor
