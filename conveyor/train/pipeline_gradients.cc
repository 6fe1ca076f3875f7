#include "conveyor/train/pipeline_gradients.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "conveyor/common/error.h"

namespace conveyor {
namespace {

// Local copies of each name, in the order given.
std::map<std::string, std::vector<at::Tensor>> ByName(const NamedTensors& params) {
  std::map<std::string, std::vector<at::Tensor>> by_name;
  for (const auto& [name, p] : params) by_name[name].push_back(p);
  return by_name;
}

at::Tensor GradOrZeros(const at::Tensor& p) {
  return p.grad().defined() ? p.grad() : at::zeros_like(p);
}

}  // namespace

PipelineGradients::PipelineGradients(Transport* world,
                                     const std::map<std::string, std::vector<int>>& holders,
                                     const TensorParallel& tp, ParameterSpecs specs,
                                     Transport* dp_group, std::shared_ptr<const ShardLayout> zero,
                                     Transport* ep_group, Transport* expert_dp_group,
                                     std::shared_ptr<const ShardLayout> expert_zero)
    : world_(world),
      rank_(world != nullptr ? world->rank() : 0),
      tp_(tp),
      specs_(std::move(specs)),
      dp_group_(dp_group),
      zero_(std::move(zero)),
      ep_group_(ep_group),
      expert_dp_group_(expert_dp_group),
      expert_zero_(std::move(expert_zero)) {
  CONVEYOR_ASSERT(expert_zero_ == nullptr || ep_group_ != nullptr)
      << "a ZeRO layout of experts without expert parallelism";
  for (const auto& [group, layout] :
       {std::pair{dp_group_, zero_.get()}, std::pair{expert_dp_group_, expert_zero_.get()}}) {
    CONVEYOR_ASSERT((group == nullptr) == (layout == nullptr))
        << "a ZeRO layout needs its DP group, and only it";
    if (layout == nullptr) continue;
    CONVEYOR_ASSERT(layout->shards() == group->world_size() && layout->index() == group->rank())
        << "shard layout " << layout->index() << " of " << layout->shards() << " for rank "
        << group->rank() << " of a DP group of " << group->world_size();
    for (const std::string& name : SharedNames(holders)) {
      CONVEYOR_ASSERT(!layout->scattered(name)) << "shared " << name << " is reduce-scattered";
    }
  }
  std::map<std::vector<int>, std::vector<std::string>> by_ranks;
  for (const auto& [name, ranks] : holders) {
    CONVEYOR_ASSERT(!ranks.empty()) << name << " has no holder";
    std::set<int> unique(ranks.begin(), ranks.end());
    owner_[name] = *unique.begin();
    if (unique.size() >= 2) by_ranks[{unique.begin(), unique.end()}].push_back(name);
  }
  for (auto& [ranks, names] : by_ranks) {  // std::map: the same order on every rank
    Group group{ranks, nullptr, names};
    CONVEYOR_ASSERT(world != nullptr) << "parameters shared across ranks need a transport";
    group.transport = world->NewGroup(ranks);
    groups_.push_back(std::move(group));
  }
}

std::set<std::string> PipelineGradients::SharedNames(
    const std::map<std::string, std::vector<int>>& holders) {
  std::set<std::string> shared;
  for (const auto& [name, ranks] : holders) {
    if (ranks.size() >= 2) shared.insert(name);
  }
  return shared;
}

void PipelineGradients::SumShared(const NamedTensors& params) {
  at::NoGradGuard no_grad;
  auto by_name = ByName(params);
  // Local copies first.
  for (auto& [name, copies] : by_name) {
    if (copies.size() < 2) continue;
    at::Tensor sum = GradOrZeros(copies[0]).clone();
    for (size_t k = 1; k < copies.size(); ++k) sum += GradOrZeros(copies[k]);
    for (at::Tensor& p : copies) p.mutable_grad() = sum.clone();
  }
  for (Group& group : groups_) {
    if (group.transport == nullptr) continue;
    std::vector<at::Tensor> flat;
    for (const std::string& name : group.names) {
      auto it = by_name.find(name);
      CONVEYOR_ASSERT(it != by_name.end()) << "rank " << rank_ << " lacks shared " << name;
      flat.push_back(GradOrZeros(it->second.front()).reshape({-1}));
    }
    std::vector<at::Tensor> buffer = {at::cat(flat)};
    group.transport->AllReduceSum(buffer);
    int64_t offset = 0;
    for (const std::string& name : group.names) {
      for (at::Tensor& p : by_name[name]) {
        p.mutable_grad() = buffer[0].narrow(0, offset, p.numel()).view(p.sizes()).clone();
      }
      offset += by_name[name].front().numel();
    }
  }
}

double PipelineGradients::GlobalNorm(const NamedTensors& params) {
  at::NoGradGuard no_grad;
  // The gradients (or the parts of them) each sum of squares counts, summed on their device
  // by a multi-tensor kernel a list and read once each (not a host wait per parameter).
  std::vector<at::Tensor> local, scattered;  // scattered: this replica's range of those
  // This rank's experts under expert parallelism: whole, and this replica's range of those
  // scattered over the experts' DP group.
  std::vector<at::Tensor> experts, experts_scattered;
  // The part of p's gradient in this replica's range of `layout`.
  const auto in_range = [](const ShardLayout& layout, const at::Tensor& p) {
    const int64_t offset = layout.OffsetOf(p);
    const auto [lo, hi] = layout.Overlap(offset, p.numel(), layout.index());
    return p.grad().reshape({-1}).narrow(0, lo - offset, hi - lo);
  };
  std::set<std::string> counted;
  for (const auto& [name, p] : params) {
    auto it = owner_.find(name);
    CONVEYOR_ASSERT(it != owner_.end()) << "unknown parameter " << name;
    if (it->second != rank_ || !counted.insert(name).second || !p.grad().defined()) continue;
    if (ep_group_ != nullptr && specs_.Of(name).grad_sum.experts) {
      // On every TP rank: the EP group may be made of TP ranks (Mesh::FoldExperts).
      if (expert_zero_ != nullptr && expert_zero_->scattered(name)) {
        experts_scattered.push_back(in_range(*expert_zero_, p));
      } else {
        experts.push_back(p.grad());
      }
      continue;
    }
    if (!CountsInNorm(specs_.Of(name).tp, tp_.rank)) continue;
    // Of the dense layers' sum only (those summed over tp x dp keep their state whole).
    if (zero_ != nullptr && specs_.Of(name).grad_sum == GradientSum{} && zero_->scattered(name)) {
      scattered.push_back(in_range(*zero_, p));
    } else {
      local.push_back(p.grad());
    }
  }
  double sum = SumOfSquares(local);
  if (zero_ != nullptr) {
    std::vector<at::Tensor> total = {at::full({1}, SumOfSquares(scattered), at::kDouble)};
    dp_group_->AllReduceSum(total);
    sum += total[0].item<double>();
  }
  if (ep_group_ != nullptr) {
    double experts_sum = SumOfSquares(experts);
    if (expert_zero_ != nullptr) {
      std::vector<at::Tensor> ranges = {
          at::full({1}, SumOfSquares(experts_scattered), at::kDouble)};
      expert_dp_group_->AllReduceSum(ranges);
      experts_sum += ranges[0].item<double>();
    }
    std::vector<at::Tensor> total = {at::full({1}, experts_sum, at::kDouble)};
    ep_group_->AllReduceSum(total);
    // Every expert of the EP group once, counted by one TP rank (the TP sum below adds them).
    if (tp_.rank == 0) sum += total[0].item<double>();
  }
  if (world_ != nullptr && world_->world_size() > 1) {
    std::vector<at::Tensor> total = {at::full({1}, sum, at::kDouble)};
    world_->AllReduceSum(total);
    sum = total[0].item<double>();
  }
  if (tp_.size > 1) {
    std::vector<at::Tensor> total = {at::full({1}, sum, at::kDouble)};
    tp_.group->AllReduceSum(total);
    sum = total[0].item<double>();
  }
  return std::sqrt(sum);
}

double PipelineGradients::SumOfSquares(at::TensorList grads) {
  if (grads.empty()) return 0;
  // Each tensor's norm by the multi-tensor kernel, in the gradients' dtype; squared and
  // summed in double.
  const double sum =
      at::stack(at::_foreach_norm(grads, 2)).to(at::kDouble).square().sum().item<double>();
  if (std::isfinite(sum)) return sum;
  // A norm past fp32's range (finite gradients under a huge loss scale), or gradients that
  // are not finite: the sum in double tells which.
  at::Tensor exact = at::zeros({}, grads.front().options().dtype(at::kDouble));
  for (const at::Tensor& g : grads) exact += g.to(at::kDouble).square().sum();
  return exact.item<double>();
}

void PipelineGradients::Scale(const NamedTensors& params, double factor) {
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> grads;
  for (const auto& [name, p] : params) {
    if (p.grad().defined()) grads.push_back(p.grad());
  }
  if (!grads.empty()) at::_foreach_mul_(grads, factor);
}

}  // namespace conveyor
