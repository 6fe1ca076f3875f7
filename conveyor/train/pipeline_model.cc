#include "conveyor/train/pipeline_model.h"

#include <ATen/ATen.h>

#include <chrono>
#include <utility>

#include "conveyor/common/error.h"
#include "conveyor/common/error_context.h"
#include "conveyor/device/compute_precision.h"
#include "conveyor/device/stream_order.h"
#include "conveyor/nn/lora.h"
#include "conveyor/nn/moe_mlp.h"
#include "conveyor/schedule/lower.h"
#include "conveyor/schedule/registry.h"
#include "conveyor/schedule/verify.h"
#include "conveyor/train/layer_costs.h"
#include "conveyor/train/model_registry.h"
#include "conveyor/train/world_collectives.h"

namespace conveyor {
namespace {

// Which pipeline ranks hold each parameter name, from the layers' parameters and the
// partition alone.
std::map<std::string, std::vector<int>> Holders(const Layout& layout,
                                                const std::vector<ParameterShapes>& layers,
                                                const std::vector<LayerRange>& partition) {
  std::map<std::string, std::vector<int>> holders;
  for (int s = 0; s < layout.num_stages(); ++s) {
    const LayerRange& range = partition[layout.part_of(s)];
    for (int l = range.begin; l < range.end; ++l) {
      for (const auto& [name, shape] : layers[l]) {
        holders[name].push_back(layout.rank_of(s));
      }
    }
  }
  return holders;
}

Mesh MakeMesh(const TrainConfig& c, Transport* world) {
  return MeshOf(c, world != nullptr ? world->world_size() : 1);
}

}  // namespace

PipelineModel::PipelineModel(const TrainConfig& config, std::shared_ptr<const ModelTask> model,
                             const RankContext& rank, const TrainTask* data)
    : config_(config),
      model_(std::move(model)),
      world_(rank.world),
      rank_(rank.rank),
      device_(rank.device),
      mesh_(MakeMesh(config, world_)),
      coords_(mesh_.coords(rank_)),
      program_(BuildSchedule(config.schedule,
                             ScheduleOptions{config.pp, config.microbatches, config.chunks})) {
  config_.Validate();
  ComputeOnOwnStream(device_);
  const c10::ScalarType compute_dtype = ScalarTypeOf(config_.dtype);
  message_dtype_ = compute_dtype;
  CONVEYOR_CHECK(config_.dtype == ComputeDtype::kFp32 || AutocastComputesIn(device_, compute_dtype))
      << "rank " << rank_ << ": --dtype " << ComputeDtypeName(config_.dtype) << " needs "
      << ComputeDtypeName(config_.dtype) << " matrix products under autocast on " << device_.str()
      << ", which this libtorch does not have"
      << (config_.dtype == ComputeDtype::kFp16
              ? " (Debian 12's libtorch 1.13 has no fp16 product on the CPU): use --dtype bf16, "
                "or a GPU"
              : ": use --dtype fp32");
  VerifyOrThrow(program_);
  program_ = Lower(program_);
  // The groups, in one order on every rank: TP, DP (x CP), pipelines, the gradient sums over
  // tp x dp (x cp), the CP ring; the experts' EP and DP.
  const Mesh::Order dp = {MeshAxis::kDp}, ep = {MeshAxis::kEp};
  const Mesh::Order dense_dp = Resolve({}).axes,
                    tp_dp = Resolve({.axes = {MeshAxis::kTp, dp[0]}}).axes;
  std::vector<MeshGroups::Request> requests = {
      {{MeshAxis::kTp}}, {dense_dp}, {{MeshAxis::kPp}, /*singles=*/true}};
  // The gradient sums over tp x dp, beside the TP group's collectives.
  if (sums_over_tp()) requests.push_back({tp_dp, /*singles=*/false, /*own=*/true});
  // The ring's messages on a transport of their own.
  if (mesh_.extent(MeshAxis::kCp) > 1) {
    requests.push_back({{MeshAxis::kCp}, /*singles=*/false, /*own=*/true});
  }
  groups_ = std::make_unique<MeshGroups>(world_, mesh_, requests);
  if (Transport* tp = groups_->Of({MeshAxis::kTp}))
    tp_timed_ = std::make_unique<TimedTransport>(tp);
  if (Transport* group = groups_->Of(dense_dp)) {
    gradient_sum_groups_[Resolve({})] = std::make_unique<TimedTransport>(group);
  }
  if (Transport* group = sums_over_tp() ? groups_->Of(tp_dp) : nullptr) {
    gradient_sum_groups_[{.axes = tp_dp}] = std::make_unique<TimedTransport>(group);
  }
  if (Transport* group = mesh_.extent(MeshAxis::kCp) > 1 ? groups_->Of({MeshAxis::kCp}) : nullptr) {
    parallel_.cp = ContextParallel{mesh_.extent(MeshAxis::kCp), coords_.cp, group};
  }
  pipeline_group_ = groups_->Of({MeshAxis::kPp});
  if (folds_experts()) {
    const Mesh experts = Mesh::FoldExperts(mesh_, config_.ep);
    // The experts' gradient sums run beside the routers' and the EP group's.
    expert_groups_ = std::make_unique<MeshGroups>(
        world_, experts,
        std::vector<MeshGroups::Request>{{ep}, {dp, /*singles=*/false, /*own=*/true}});
    if (config_.ep > 1) {
      ep_timed_ = std::make_unique<TimedTransport>(expert_groups_->Of(ep));
      parallel_.ep = {config_.ep, experts.coords(rank_).ep, ep_timed_.get()};
    }
    if (Transport* group = expert_groups_->Of(dp)) {
      gradient_sum_groups_[{.experts = true}] = std::make_unique<TimedTransport>(group);
    }
    // The forward halves' all-to-alls on groups of their own.
    if (config_.ep > 1 && overlaps_pairs()) {
      overlap_groups_ =
          std::make_unique<MeshGroups>(world_, experts, std::vector<MeshGroups::Request>{{ep}});
      overlap_ep_timed_ = std::make_unique<TimedTransport>(overlap_groups_->Of(ep));
      parallel_.ep.overlap_group = overlap_ep_timed_.get();
    }
  }
  TensorParallel& tp = parallel_.tp;
  tp = TensorParallel{mesh_.tp(), coords_.tp, tp_timed_.get()};
  tp.sequence_parallel = config_.sequence_parallel;
  tp.kv_replicas = KvReplicas(static_cast<int>(ModelSizes(config_.model).kv_heads), tp.size);
  if (!gradient_sum_groups_.empty()) program_ = WithGradReductions(program_);

  const Layout& layout = program_.layout;
  // Listed once: a model without its own list builds its layers, one at a time, to list them.
  const std::vector<ParameterShapes> shapes = model_->LayerShapes();
  if (!config_.stage_layers.empty()) {
    partition_ = PartitionBySizes(ParseStageLayers(config_.stage_layers, "--stage-layers"),
                                  model_->num_layers(), layout.pipeline_length(), "--stage-layers");
  } else {
    std::vector<double> costs = LayerCosts(config_, *model_, shapes, data);
    if (config_.partition == PartitionBy::kProfile && world_ != nullptr &&
        world_->world_size() > 1) {
      // Timings differ between ranks: every rank must cut at the same places.
      const at::Tensor sum = SumOverRanks(world_, at::tensor(costs, at::kDouble));
      for (size_t l = 0; l < costs.size(); ++l) {
        costs[l] = sum[l].item<double>() / world_->world_size();
      }
    }
    partition_ = Partition(costs, layout.pipeline_length());
  }
  holders_ = Holders(layout, shapes, partition_);
  // Under expert parallelism a pipeline holds its ranks' experts only (its ranks share their
  // EP coordinate): the others' have no holder here.
  if (parallel_.ep.size > 1) {
    const int local = config_.model.experts / parallel_.ep.size;
    std::erase_if(holders_, [&](const auto& entry) {
      const int expert = ExpertOfName(entry.first);
      return expert >= 0 && expert / local != parallel_.ep.rank;
    });
  }
  // Activations and their gradients cross between stages in the compute dtype: half the
  // bytes under bf16 / fp16; weights, gradients and reductions stay fp32.
  const auto build_start = std::chrono::steady_clock::now();
  pipeline_ = std::make_unique<PipelineRank>(
      program_, pipeline_rank(), pipeline_group_,
      [model = model_, ranges = partition_, &layout, parallel = parallel_, device = device_,
       rank = rank_, specs = &specs_](int stage) {
        // A refusal while building (the memory limit, a model folder's tensor) names the
        // stage, as a refusal while running names the action.
        return WithErrorContext("rank " + std::to_string(rank) + ", stage " +
                                    std::to_string(stage) + ", building its layers",
                                [&] {
                                  auto stack = std::make_unique<LayerStack>(
                                      model->BuildLayers(parallel, ranges[layout.part_of(stage)]));
                                  MoveParameters(stack->NamedParameters(), device);
                                  specs->Add(stack->parameter_specs());
                                  return stack;
                                });
      },
      at::TensorOptions().dtype(message_dtype_).device(device_));
  stage_build_s_ =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - build_start).count();
  for (const auto& [index, stage] : pipeline_->stages()) {
    stage->set_recompute(config_.recompute == Recompute::kFull);
    stage->set_compute_dtype(compute_dtype);
    stage->set_message_dtype(message_dtype_);
  }
  pipeline_->executor().set_overlap_pairs(overlaps_pairs());
}

bool PipelineModel::overlaps_pairs() const {
  if (config_.sequential_pairs || !device_.is_cpu() || mesh_.tp() > 1 ||
      mesh_.extent(MeshAxis::kCp) > 1) {
    return false;
  }
  for (const std::vector<Action>& actions : program_.ranks) {  // every rank decides alike
    for (const Action& a : actions) {
      if (a.op == Op::kOverlapFB) return true;
    }
  }
  return false;
}

at::Tensor PipelineModel::GatherWhole(const std::string& name, const at::Tensor& local) const {
  const TensorParallelSplit split = specs_.Of(name).tp;
  const TensorParallel& tp = parallel_.tp;
  if (split.replicated() || tp.size == 1) return local;
  return GatherShards(local, split, tp,
                      split.padded ? ModelSizes(config_.model).vocab
                                   : local.size(split.dim) * tp.size / split.replicas);
}

std::map<std::string, at::Tensor> PipelineModel::GatherExperts(
    const std::map<std::string, at::Tensor>& tensors) const {
  if (ep_timed_ == nullptr) return tensors;
  const ExpertParallel& ep = parallel_.ep;
  const int local = config_.model.experts / ep.size;
  std::map<std::string, at::Tensor> out;
  // This rank's experts under their local index (0 .. local - 1): the same names, in the same
  // order, on every rank of the group.
  std::map<std::string, at::Tensor> mine;
  for (const auto& [key, t] : tensors) {
    const std::string name = key.substr(0, key.find('/'));
    if (!specs_.Of(name).grad_sum.experts) {
      out.emplace(key, t);
      continue;
    }
    const int expert = ExpertOfName(key);
    CONVEYOR_ASSERT(expert >= ep.rank * local && expert < (ep.rank + 1) * local)
        << "rank " << rank_ << " holds " << key << ", not one of its experts";
    mine.emplace(WithExpert(key, expert - ep.rank * local), t);
  }
  for (const auto& [key, t] : mine) {
    const std::vector<at::Tensor> all = ep_timed_->AllGather(t.contiguous());  // by EP rank
    for (int r = 0; r < ep.size; ++r) {
      out.emplace(WithExpert(key, r * local + ExpertOfName(key)), all[r]);
    }
  }
  return out;
}

std::vector<MoeMlp*> PipelineModel::ExpertBlocks() const {
  std::vector<MoeMlp*> blocks;
  for (const auto& [index, stage] : pipeline_->stages()) {
    // PipelineModel's stages are LayerStacks.
    const auto* stack = dynamic_cast<const LayerStack*>(&stage->module());
    CONVEYOR_ASSERT(stack != nullptr) << "stage " << index << " is not a LayerStack";
    for (MoeMlp* block : stack->ExpertBlocks()) blocks.push_back(block);
  }
  return blocks;
}

std::vector<GradientSum> PipelineModel::GradientSums() const {
  std::vector<GradientSum> sums = {{}};
  if (folds_experts()) sums.push_back({.experts = true});
  if (sums_over_tp()) sums.push_back(Resolve({.axes = {MeshAxis::kTp, MeshAxis::kDp}}));
  sums.front() = Resolve(sums.front());
  return sums;
}

std::map<std::string, std::vector<int>> PipelineModel::TrainedHolders() const {
  if (config_.model.lora_rank == 0) return holders_;
  std::map<std::string, std::vector<int>> trained;
  for (const auto& [name, ranks] : holders_) {
    if (IsLoraParameter(name)) trained.emplace(name, ranks);
  }
  return trained;
}

NamedTensors PipelineModel::TrainedParameters() const {
  NamedTensors trained;
  for (auto& named : Parameters()) {
    if (named.second.requires_grad()) trained.push_back(std::move(named));
  }
  return trained;
}

GradientSum PipelineModel::Resolve(const GradientSum& declared) const {
  // Unfolded, the experts' mesh is the dense one.
  GradientSum sum = folds_experts() ? declared : GradientSum{.axes = declared.axes};
  // The CP ranks of a replica see different positions of the same sequences: the dense
  // layers' sums run over them too, beside the data-parallel axis.
  if (!sum.experts && mesh_.extent(MeshAxis::kCp) > 1) {
    const auto at = std::find(sum.axes.begin(), sum.axes.end(), MeshAxis::kDp);
    sum.axes.insert(at, MeshAxis::kCp);
  }
  return sum;
}

bool PipelineModel::folds_experts() const { return config_.ep > 1 || routes_over_tp(); }

bool PipelineModel::routes_over_tp() const { return config_.model.experts > 0 && mesh_.tp() > 1; }

bool PipelineModel::sums_over_tp() const {
  return mesh_.tp() > 1 && (routes_over_tp() || config_.sequence_parallel ||
                            config_.model.qk_norm == "head" || config_.model.lora_rank > 0);
}

TimedTransport* PipelineModel::gradient_sum_group(const GradientSum& sum) const {
  const auto it = gradient_sum_groups_.find(sum);
  return it == gradient_sum_groups_.end() ? nullptr : it->second.get();
}

}  // namespace conveyor
