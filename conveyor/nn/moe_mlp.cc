#include "conveyor/nn/moe_mlp.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

#include <cmath>
#include <utility>
#include <vector>

#include "conveyor/comm/transport.h"
#include "conveyor/common/error.h"
#include "conveyor/module/auxiliary_loss.h"
#include "conveyor/nn/expert_dispatch.h"
#include "conveyor/nn/layer.h"
#include "conveyor/nn/linear.h"
#include "conveyor/nn/tensor_parallel.h"
#include "conveyor/nn/transformer.h"

namespace conveyor {
namespace {

// `x` summed over the TP ranks, outside autograd.
at::Tensor SumOverTensorParallel(const at::Tensor& x, const TensorParallel& tp) {
  std::vector<at::Tensor> sum = {x.clone()};
  tp.group->AllReduceSum(sum);
  return sum[0];
}

// The indices that sort the 1-D `values`, ties in their order.
at::Tensor StableSort(const at::Tensor& values, bool descending) {
  return std::get<1>(values.sort(/*stable=*/c10::optional<bool>(true), /*dim=*/0, descending));
}

// Expert i's three weight names under `prefix`: gate, up, down.
std::vector<std::string> ExpertNames(const MoeConfig& c, const std::string& prefix, int i) {
  const std::string p = prefix + ".experts." + std::to_string(i) + ".";
  if (c.mixtral_names) return {p + "w1.weight", p + "w3.weight", p + "w2.weight"};
  return {p + "gate_proj.weight", p + "up_proj.weight", p + "down_proj.weight"};
}

}  // namespace

namespace {
constexpr std::string_view kExperts = ".experts.";
}  // namespace

int ExpertOfName(std::string_view name) {
  const size_t at = name.find(kExperts);
  if (at == std::string_view::npos) return -1;
  const size_t begin = at + kExperts.size(), end = name.find('.', begin);
  if (end == std::string_view::npos || end == begin) return -1;
  int e = 0;
  for (size_t i = begin; i < end; ++i) {
    if (name[i] < '0' || name[i] > '9') return -1;
    e = 10 * e + (name[i] - '0');
  }
  return e;
}

std::string WithExpert(std::string_view name, int e) {
  CONVEYOR_ASSERT(ExpertOfName(name) >= 0 && e >= 0) << "'" << name << "' is no expert's weight";
  const size_t begin = name.find(kExperts) + kExperts.size(), end = name.find('.', begin);
  return std::string(name.substr(0, begin)) + std::to_string(e) + std::string(name.substr(end));
}

void CheckMoeConfig(const MoeConfig& c) {
  CONVEYOR_CHECK(c.hidden >= 1 && c.experts >= 1 && c.expert_units >= 1 && c.shared_units >= 0)
      << "an MoE block needs hidden, experts and expert units >= 1 and shared units >= 0, got "
      << c.hidden << ", " << c.experts << ", " << c.expert_units << " and " << c.shared_units;
  CONVEYOR_CHECK(c.top_k >= 1 && c.top_k <= c.experts)
      << "top-k must be within [1, experts = " << c.experts << "], got " << c.top_k;
  for (const auto& [name, value] : {std::pair{"the capacity factor", c.capacity_factor},
                                    std::pair{"the auxiliary loss coefficient", c.aux_loss_coef},
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
               ParameterSpecs& specs, const ExpertParallel& ep, const TensorParallel& tp)
    : config_(config), prefix_(prefix), ep_(ep), tp_(tp) {
  CheckMoeConfig(config);
  CONVEYOR_CHECK(ep.size >= 1 && config.experts % ep.size == 0)
      << "the " << config.experts << " experts must divide evenly over --ep " << ep.size;
  CONVEYOR_ASSERT(ep.rank >= 0 && ep.rank < ep.size && (ep.size == 1 || ep.group != nullptr))
      << "expert-parallel rank " << ep.rank << " of " << ep.size;
  const int local = config.experts / ep.size;
  first_expert_ = ep.rank * local;
  for (const auto& [name, shape] : MoeParameterShapes(config, prefix)) {
    const int expert = ExpertOfName(name);
    // An expert's weight: this rank's experts only.
    if (expert >= 0 && (expert < first_expert_ || expert >= first_expert_ + local)) continue;
    // Under tp the ranks route different tokens: the router's and the shared expert's
    // gradients are summed over the TP ranks too.
    const ParameterSpec spec = expert >= 0 ? ExpertWeight() : ReplicatedSpec(tp.size > 1);
    at::Tensor param;
    if (config.weights == WeightInit::kDrawn) {
      at::Generator gen = TensorInitGenerator(seed, name);
      param =
          ShardParam(name, spec, NormalParam(gen, shape, config.init_std), TensorParallel{}, specs);
    } else {
      param = UndrawnParam(name, spec, shape, TensorParallel{}, specs, config.weights);
    }
    params_.push_back({name, param});
  }
  size_t next = 0;
  router_ = params_[next++].second;
  for (int i = 0; i < local; ++i) {
    gate_.push_back(params_[next++].second);
    up_.push_back(params_[next++].second);
    down_.push_back(params_[next++].second);
  }
  if (config.shared_units > 0) {
    shared_gate_proj_ = params_[next++].second;
    shared_up_ = params_[next++].second;
    shared_down_ = params_[next++].second;
    if (config.shared_gate) shared_gate_ = params_[next++].second;
  }
  bias_ = at::zeros({config.experts}, at::kFloat);
  load_ = at::zeros({config.experts}, at::kLong);
}

at::Tensor MoeMlp::Expert(const at::Tensor& x, const at::Tensor& gate, const at::Tensor& up,
                          const at::Tensor& down) {
  return Linear(at::silu(Linear(x, gate, {})) * Linear(x, up, {}), down, {});
}

at::Tensor MoeMlp::Forward(const at::Tensor& x) {
  const int64_t n = x.size(0), c = x.size(2);
  const int64_t e = config_.experts, k = config_.top_k;
  // Under tp each rank routes its positions of every sequence (n, T/tp, C): those it holds
  // under sequence parallelism, else taken from the replicated x (n, T, C). Where they do not
  // split (a generated token: no gradients then) every TP rank routes all of them alike.
  const bool held = tp_.splits_sequence();
  const bool split = held || (tp_.size > 1 && x.size(1) % tp_.size == 0);
  const int64_t all_tokens = n * x.size(1) * (held ? tp_.size : 1);
  CONVEYOR_ASSERT(split || tp_.size == 1 || !at::GradMode::is_enabled())
      << prefix_ << ": " << all_tokens << " tokens with gradients do not split over " << tp_.size
      << " tensor-parallel ranks";
  const TensorParallel& over = split ? tp_ : TensorParallel{};  // where the tokens are split
  const at::Tensor mine = held ? x : TokensOfTensorParallelRank(x, over);  // (n, T/tp, C)
  const at::Tensor flat = mine.reshape({-1, c});
  const int64_t tokens = flat.size(0);
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
  const at::Tensor counts = at::bincount(slots, {}, e);   // (E) routed, on x's device
  at::Tensor order = StableSort(slots, false);            // (N k) by expert, then position
  at::Tensor kept = counts;
  int64_t dropped = 0;
  if (config_.capacity_factor > 0) {
    // Each expert keeps its first `capacity` copies by priority: position (`order` as it is)
    // or the highest gates.
    const auto capacity = static_cast<int64_t>(
        std::ceil(config_.capacity_factor * static_cast<double>(tokens * k) / e));
    if (config_.drop_by == TokenDrop::kProbability) {
      const at::Tensor by_gate = StableSort(gates.detach().reshape({tokens * k}), true);
      order = by_gate.index_select(0, StableSort(slots.index_select(0, by_gate), false));
    }
    const at::Tensor starts = at::cumsum(counts, 0) - counts;  // (E) each expert's first row
    const at::Tensor within = at::arange(tokens * k, counts.options()) -
                              starts.index_select(0, slots.index_select(0, order));
    order = order.masked_select(within < capacity);
    kept = at::clamp_max(counts, capacity);
    dropped = tokens * k - order.size(0);
  }
  const at::Tensor token_of = at::floor_divide(order, k);
  const at::Tensor sorted = flat.index_select(0, token_of);  // (M, C), M = N k - dropped
  const at::Tensor expert_out = RunExperts(sorted, kept);    // (M, C)
  const at::Tensor weighted =
      expert_out *
      gates.reshape({tokens * k}).index_select(0, order).unsqueeze(1).to(expert_out.scalar_type());
  at::Tensor y = at::zeros({tokens, c}, weighted.options()).index_add(0, token_of, weighted);
  if (config_.shared_units > 0) {
    at::Tensor shared = Expert(flat, shared_gate_proj_, shared_up_, shared_down_);
    if (config_.shared_gate) shared = shared * at::sigmoid(Linear(flat, shared_gate_, {}));
    y = y + shared;
  }
  y = y.reshape(mine.sizes());
  if (!held) y = TokensOfEveryTensorParallelRank(y, over);

  // The counts and the losses over every token of the micro-batch: summed over the TP ranks
  // where they split them (the sums' backward the identity: each token on one rank).
  const at::Tensor all_counts = split ? SumOverTensorParallel(counts, tp_) : counts;
  if (AuxiliaryLossesCounted()) {
    load_ += all_counts.cpu();
    // On the counts' device: NCCL sums GPU tensors only.
    dropped_ +=
        split
            ? SumOverTensorParallel(at::tensor({dropped}).to(counts.device()), tp_).item<int64_t>()
            : dropped;
  }
  const double scale = 1.0 / static_cast<double>(all_tokens);
  if (config_.aux_loss_coef > 0) {
    const at::Tensor probs = config_.scoring == RouterScoring::kSoftmax
                                 ? scores
                                 : scores / (scores.sum(-1, true) + 1e-20);
    const at::Tensor f = all_counts.to(probs.device(), at::kFloat) * scale;
    const at::Tensor p = ReduceFromTensorParallel(probs.sum(0), over) * scale;  // (E)
    y = AttachAuxiliaryLoss(y, config_.aux_loss_coef * e * (f * p).sum(), "load_balance");
  }
  if (config_.z_loss_coef > 0) {
    const at::Tensor z = ReduceFromTensorParallel(logits.logsumexp(-1).square().sum(), over);
    y = AttachAuxiliaryLoss(y, config_.z_loss_coef * z * scale, "router_z");
  }
  return y;
}

at::Tensor MoeMlp::LocalExperts(const at::Tensor& rows, const std::vector<int64_t>& counts) {
  std::vector<at::Tensor> outputs;
  int64_t begin = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] == 0) continue;
    outputs.push_back(Expert(rows.narrow(0, begin, counts[i]), gate_[i], up_[i], down_[i]));
    begin += counts[i];
  }
  return outputs.empty() ? rows * 0 : at::cat(outputs);
}

at::Tensor MoeMlp::RunExperts(const at::Tensor& sorted, const at::Tensor& counts) {
  const ExpertRows mine = DispatchToExperts(sorted, counts, config_.experts, ep_);
  return CombineFromExperts(LocalExperts(mine.rows, mine.per_expert), mine, ep_);
}

void MoeMlp::ResetLoad() {
  load_.zero_();
  dropped_ = 0;
}

void MoeMlp::UpdateSelectionBias(const at::Tensor& load) {
  CONVEYOR_ASSERT(config_.bias_rate > 0) << "a selection bias update without a rate";
  const at::Tensor l = load.to(at::kFloat).cpu();
  bias_ += config_.bias_rate * at::sign(l.mean() - l);
}

void MoeMlp::RestoreSelectionBias(const at::Tensor& bias) {
  CONVEYOR_CHECK(bias.dim() == 1 && bias.size(0) == config_.experts)
      << prefix_ << ": a selection bias of shape " << bias.sizes() << " for " << config_.experts
      << " experts";
  bias_ = bias.to(at::kFloat).cpu().clone();
}

}  // namespace conveyor
