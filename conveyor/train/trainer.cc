#include "conveyor/train/trainer.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "conveyor/comm/hop_latency.h"
#include "conveyor/common/error_context.h"
#include "conveyor/common/process_stats.h"
#include "conveyor/device/compute_precision.h"
#include "conveyor/module/microbatch.h"
#include "conveyor/nn/moe_mlp.h"
#include "conveyor/optim/grouped_optimizer.h"
#include "conveyor/optim/sharded_adamw.h"
#include "conveyor/profile/comm_breakdown.h"
#include "conveyor/profile/memory_tracker.h"
#include "conveyor/sim/mesh_costs.h"
#include "conveyor/train/compute_placement.h"
#include "conveyor/train/pipeline_step_report.h"
#include "conveyor/train/world_collectives.h"

namespace conveyor {
namespace {

// "all-reduce 4.0 MiB": a collective as a trace names it.
std::string CollectiveName(const CollectiveSpan& c) {
  const double bytes = static_cast<double>(c.bytes);
  char size[32];
  if (bytes >= (1 << 20)) {
    std::snprintf(size, sizeof size, " %.1f MiB", bytes / (1 << 20));
  } else if (bytes >= (1 << 10)) {
    std::snprintf(size, sizeof size, " %.1f KiB", bytes / (1 << 10));
  } else {
    std::snprintf(size, sizeof size, " %.0f B", bytes);
  }
  return c.name + (c.bytes > 0 ? size : "");
}

// Records `spans` as phases of `track` and returns the seconds they took.
double RecordCollectives(const std::vector<CollectiveSpan>& spans, PhaseTrack track,
                         StepRecorder& recorder) {
  for (const CollectiveSpan& c : spans) recorder.Phase(CollectiveName(c), c.start, c.end, track);
  return TotalSeconds(spans);
}

// config.loss_scale, or the dtype's default (65536 for fp16, as PyTorch's GradScaler).
LossScaler MakeLossScaler(const TrainConfig& config) {
  const double initial = config.loss_scale > 0                 ? config.loss_scale
                         : config.dtype == ComputeDtype::kFp16 ? 65536.0
                                                               : 0.0;
  return initial > 0 ? LossScaler(initial, config.loss_scale_window) : LossScaler();
}

// "stage 1", "stages 0 and 7": the stages this rank runs, for messages.

std::string StagesOf(const PipelineRank& pipeline) {
  std::string out;
  for (const auto& [index, stage] : pipeline.stages()) {
    out += (out.empty() ? "" : " and ") + std::to_string(index);
  }
  return (pipeline.stages().size() > 1 ? "stages " : "stage ") + out;
}

}  // namespace

double ExpertLoadMax(const std::vector<double>& load) {
  return load.empty() ? 0 : *std::max_element(load.begin(), load.end());
}

double ExpertLoadMean(const std::vector<double>& load) {
  return load.empty() ? 0 : std::accumulate(load.begin(), load.end(), 0.0) / load.size();
}

Trainer::Trainer(const TrainConfig& config, std::shared_ptr<const TrainTask> task,
                 const RankContext& rank)
    : task_(std::move(task)),
      model_(config, task_->model(), rank, task_.get()),
      schedule_{config.lr, config.min_lr_ratio, config.warmup_steps, config.steps},
      loss_scaler_(MakeLossScaler(config)),
      auxiliary_names_(task_->model()->AuxiliaryLossNames()),
      expert_blocks_(task_->model()->ExpertBlocks()) {
  // Activation memory on the CPU is counted by wrapping its allocator; a GPU's caching
  // allocator keeps its own counts (device_memory.h), so the CPU's is left alone there.
  if (!model_.device().is_cuda()) MemoryTracker::Install();
  // Every parameter's gradient is summed over a group the model created.
  const std::vector<GradientSum> sums = model_.GradientSums();
  // The index in `sums` of the group parameter `name` sums its gradient over.
  const auto sum_of = [this, sums](const std::string& name) {
    const GradientSum sum = model_.Resolve(model_.parameter_specs().Of(name).grad_sum);
    const auto it = std::find(sums.begin(), sums.end(), sum);
    CONVEYOR_ASSERT(it != sums.end())
        << "the parameter " << name << " sums its gradient over "
        << (sum.experts ? "the experts' " : "") << Mesh::OrderName(sum.axes)
        << ", whose groups the model does not create";
    return static_cast<size_t>(it - sums.begin());
  };
  std::vector<NamedTensors> summed(sums.size());  // the parameters of each group, in order
  for (const auto& named : model_.TrainedParameters()) {
    summed[sum_of(named.first)].push_back(named);
  }
  // The optimizer: AdamW, or under ZeRO-1 the dense and the experts' parameters' state sharded
  // over their groups (ShardedAdamW: the dense replicas, and the experts' own replicas), their
  // gradients reduce-scattered over its ranges (shard_layout.h; the shared parameters stay
  // whole for SumShared). The few parameters summed over tp x dp (norms under sequence
  // parallelism, routers) keep their state whole.
  const GradientSum dense_sum = model_.Resolve({}), experts_sum{.experts = true};
  if (config.cache_weight_casts && config.dtype != ComputeDtype::kFp32) weight_casts_.emplace();
  adamw_kernel_ = ResolveAdamWKernel(config.adamw_kernel, model_.device());
  const AdamWOptions adamw{.weight_decay = config.weight_decay, .kernel = adamw_kernel_};
  std::vector<std::unique_ptr<Optimizer>> optimizers;
  std::vector<std::shared_ptr<const ShardLayout>> zero(sums.size());
  for (size_t i = 0; i < sums.size(); ++i) {
    TimedTransport* group = model_.gradient_sum_group(sums[i]);
    const bool sharded = sums[i] == dense_sum || sums[i] == experts_sum;
    if (config.zero == 1 && sharded && group != nullptr && !summed[i].empty()) {
      optimizers.push_back(std::make_unique<ShardedAdamW>(adamw, group));
      zero[i] = std::make_shared<const ShardLayout>(
          summed[i], group->world_size(), group->rank(),
          PipelineGradients::SharedNames(model_.TrainedHolders()));
    } else {
      optimizers.push_back(std::make_unique<AdamW>(adamw));
    }
    if (group != nullptr) {
      gradient_sums_.push_back(
          {sums[i], std::make_unique<DataParallelReducer>(
                        group, DpBucketBytes(config, model_.device().is_cuda()), zero[i])});
    }
  }
  if (optimizers.size() == 1) {
    optimizer_ = std::move(optimizers.front());
  } else {
    optimizer_ = std::make_unique<GroupedOptimizer>(std::move(optimizers), sum_of);
  }
  if (!gradient_sums_.empty()) {
    model_.pipeline().executor().set_reduce_grad_hook([this](Stage& stage) {
      const NamedTensors params = stage.module().NamedParameters();
      const ParameterSpecs& specs = model_.parameter_specs();
      for (GradientReduction& reduction : gradient_sums_) {
        NamedTensors mine;
        for (const auto& named : params) {
          // A frozen weight (LoRA's base) has no gradient to sum.
          if (named.second.requires_grad() &&
              model_.Resolve(specs.Of(named.first).grad_sum) == reduction.sum) {
            mine.push_back(named);
          }
        }
        reduction.reducer->Start(mine);
      }
    });
  }
  // The sharded state's group and layout of `sum`, if GradientSums has it.
  const auto zero_of = [&](const GradientSum& sum) {
    const auto it = std::find(sums.begin(), sums.end(), sum);
    const size_t i = static_cast<size_t>(it - sums.begin());
    return it != sums.end() && zero[i] != nullptr
               ? std::pair{static_cast<Transport*>(model_.gradient_sum_group(sum)), zero[i]}
               : std::pair<Transport*, std::shared_ptr<const ShardLayout>>{};
  };
  const auto [dense_group, dense_zero] = zero_of(dense_sum);
  const auto [experts_group, experts_zero] = zero_of(experts_sum);
  gradients_ = std::make_unique<PipelineGradients>(model_.pipeline_group(), model_.TrainedHolders(),
                                                   model_.parallel().tp, model_.parameter_specs(),
                                                   dense_group, dense_zero, model_.ep_group(),
                                                   experts_group, experts_zero);
  clock_origin_ = SharedClockOrigin(rank.world);
  const Layout& layout = model_.program().layout;
  recorder_ = std::make_unique<StepRecorder>(model_.pipeline_rank(), layout.num_ranks(),
                                             clock_origin_, model_.device());
  recorder_->Attach(model_.pipeline().executor());
  if (!model_.device().is_cuda()) {
    sharing_ = GatherPipelineSharing(rank.world, model_.coords(), layout.num_ranks());
  }
  Transport* pipeline_group = model_.pipeline_group();
  if (pipeline_group != nullptr && pipeline_group->world_size() > 1) {
    const int64_t samples =
        (config.batch_size / model_.mesh().dp() + config.microbatches - 1) / config.microbatches;
    const int64_t message_bytes = static_cast<int64_t>(c10::elementSize(model_.message_dtype())) *
                                  samples *
                                  model_.parallel().tp.local_positions(
                                      model_.parallel().cp.local_length(config.model.seq_len)) *
                                  config.model.hidden;
    hop_s_ =
        WithErrorContext("rank " + std::to_string(model_.rank()) + ", timing a message of " +
                             std::to_string(message_bytes) + " bytes to its pipeline neighbours",
                         [&] { return MeasureHopLatency(*pipeline_group, message_bytes, 20); });
  }
}

StepMetrics Trainer::Step() {
  if (startup_s_ < 0) startup_s_ = SecondsSinceProcessStart();
  const auto start = std::chrono::steady_clock::now();
  const NamedTensors params = model_.TrainedParameters();
  for (const auto& [name, p] : params) p.mutable_grad() = at::Tensor();
  // This replica's share of the batch (read ahead during the previous step when it could
  // be); every loss is divided by the whole batch's targets.
  const Mesh& mesh = model_.mesh();
  const int replica = model_.coords().dp, replicas = mesh.dp();
  const auto data_start = std::chrono::steady_clock::now();
  const TrainTask::ReplicaBatch share = next_share_step_ == step_ && next_share_.valid()
                                            ? next_share_.get()
                                            : task_->TrainShare(step_, replica, replicas);
  const double data_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - data_start).count();
  if (step_ + 1 < config().steps) {
    next_share_step_ = step_ + 1;
    next_share_ =
        std::async(std::launch::async, [task = task_, step = step_ + 1, replica, replicas] {
          return task->TrainShare(step, replica, replicas);
        });
  }
  const Batch mine = ToDevice(share.rows, model_.device());
  PipelineRank& pipeline = model_.pipeline();
  TimedTransport* dp_timed = model_.dp_group();
  TimedTransport* tp_timed = model_.tp_group();
  StepMetrics m;
  m.data_s = data_s;
  m.loss_scale = loss_scaler_.scale();
  for (const auto& [index, stage] : pipeline.stages()) stage->set_loss_scale(m.loss_scale);
  recorder_->BeginStep();
  // From here on, the collectives of this step (not those of evaluations or checkpoints).
  if (tp_timed != nullptr) tp_timed->TakeSpans();
  for (TimedTransport* ep : {model_.ep_group(), model_.overlap_ep_group()}) {
    if (ep != nullptr) ep->TakeSpans();
  }
  if (dp_timed != nullptr) dp_timed->TakeSpans();
  const double pipeline_start = Executor::Now() - clock_origin_;
  const double local_loss =
      pipeline.Step(SplitBatch(mine, config().microbatches, share.batch_targets));
  const double pipeline_end = Executor::Now() - clock_origin_;
  recorder_->UseDeviceTimes(pipeline.executor().device_runs());
  const int64_t pipeline_peak_bytes = recorder_->PeakBytes();  // before the optimizer's state

  // A refusal between the micro-batches and the update (the memory limit) names the rank, its
  // stages and the work, as one during the micro-batches names the action (executor.h).
  const auto doing = [&](const char* work, auto&& run) {
    return WithErrorContext(
        "rank " + std::to_string(model_.rank()) + ", " + StagesOf(pipeline) + ", " + work, run);
  };
  double phase = Executor::Now();
  if (!gradient_sums_.empty()) {
    for (GradientReduction& reduction : gradient_sums_) {
      m.dp += doing("the data-parallel reduction", [&] { return reduction.reducer->Finish(); });
    }
    recorder_->Phase("dp reduce wait", phase);
  }
  phase = Executor::Now();
  doing("summing shared gradients", [&] { gradients_->SumShared(params); });
  recorder_->Phase("sum shared grads", phase);
  phase = Executor::Now();
  m.grad_norm = doing("the gradient norm", [&] { return gradients_->GlobalNorm(params); }) /
                m.loss_scale;  // of the true gradients
  recorder_->Phase("grad norm", phase);
  phase = Executor::Now();
  const Layout& layout = model_.program().layout;
  // Ranks sharing cores need each other's compute times to tell their work from the sharing.
  const bool shares = sharing_.Shares();
  const PipelineStepReport pipeline_step = GatherStepReports(
      model_.pipeline_group(),
      RankStepReport{SendPostTimes(layout, recorder_->step()),
                     shares
                         ? ComputeSlots(model_.program(), recorder_->step(), model_.pipeline_rank())
                         : std::vector<double>{},
                     pipeline_start, pipeline_end, local_loss, AuxiliaryLossValues(pipeline),
                     TakeExpertLoads()});
  // Every replica's share of the batch: the loss, the auxiliary losses, the expert loads.
  std::vector<double> sums = {pipeline_step.loss};
  sums.insert(sums.end(), pipeline_step.auxiliary.begin(), pipeline_step.auxiliary.end());
  sums.insert(sums.end(), pipeline_step.expert_load.begin(), pipeline_step.expert_load.end());
  const at::Tensor summed = SumOverRanks(dp_timed, at::tensor(sums, at::kDouble)).contiguous();
  const double* total = summed.data_ptr<double>();
  m.loss = *total++;
  for (const std::string& name : auxiliary_names_) m.auxiliary_losses[name] = *total++;
  for (const auto& [name, experts] : expert_blocks_) {
    m.expert_load[name].assign(total, total + experts);
    total += experts;
    if (*total > 0) m.tokens_dropped[name] = *total;
    ++total;
  }
  recorder_->Phase("gather loss", phase);
  m.step = step_ + 1;
  m.lr = schedule_.At(m.step);
  m.skipped = !std::isfinite(m.loss) || !std::isfinite(m.grad_norm);
  m.overflow = m.skipped && std::isfinite(m.loss) && loss_scaler_.ShouldBackOff();
  CONVEYOR_CHECK(!m.skipped || m.overflow || config().skip_nonfinite_steps)
      << "step " << m.step << ": the loss is " << m.loss << " and the gradient norm " << m.grad_norm
      << "; stopping before the update (a learning rate too high, or weights "
      << "that hold NaN or inf; --skip-nonfinite-steps skips such steps instead)";
  phase = Executor::Now();
  if (m.overflow) loss_scaler_.BackOff();
  if (!m.skipped) {
    // Unscaled and clipped in one pass over the gradients.
    double factor = 1 / m.loss_scale;
    if (config().clip > 0 && m.grad_norm > config().clip) {
      factor *= config().clip / (m.grad_norm + 1e-6);
    }
    if (factor != 1) PipelineGradients::Scale(params, factor);
    // The first update creates the optimizer's state (AdamW's two moments a weight).
    doing("the optimizer's update", [&] { optimizer_->Step(params, m.lr, m.step); });
    // Auxiliary-loss-free balancing: each block's selection bias follows the step's load.
    for (MoeMlp* block : model_.ExpertBlocks()) {
      if (block->config().bias_rate > 0) {
        block->UpdateSelectionBias(at::tensor(m.expert_load.at(block->prefix()), at::kDouble));
      }
    }
    loss_scaler_.Grow();
  }
  step_ = m.step;
  recorder_->Phase("optimizer", phase);
  AxisCommTimes axes;
  if (dp_timed != nullptr) {
    axes.dp_s = RecordCollectives(dp_timed->TakeSpans(), PhaseTrack::kDataParallel, *recorder_);
    // Exposed: the collectives on this thread (the reducer's are m.dp.comm_s of dp_s) and the
    // reducer's that the optimizer waited for (at most all of them: the wait also covers
    // the reducer thread's copies and wake-up).
    axes.dp_exposed_s =
        std::clamp(axes.dp_s - m.dp.comm_s + std::min(m.dp.exposed_s, m.dp.comm_s), 0.0, axes.dp_s);
  }
  if (tp_timed != nullptr) {
    axes.tp_s = RecordCollectives(tp_timed->TakeSpans(), PhaseTrack::kTensorParallel, *recorder_);
  }
  if (TimedTransport* ep_timed = model_.ep_group()) {
    // Both lanes' all-to-alls (the overlapped forward halves' on a group of their own).
    std::vector<CollectiveSpan> spans = ep_timed->TakeSpans();
    if (TimedTransport* lane1 = model_.overlap_ep_group()) {
      for (CollectiveSpan& span : lane1->TakeSpans()) spans.push_back(std::move(span));
    }
    axes.ep_s = RecordCollectives(spans, PhaseTrack::kExpertParallel, *recorder_);
  }
  measurements_.Add(
      recorder_->step(), pipeline.executor().last_stats(),
      BreakDownComm(layout, recorder_->step(), model_.pipeline_rank(), pipeline_step.send_posts),
      pipeline_step.last_end - pipeline_step.first_start, pipeline_peak_bytes, axes,
      shares
          ? ComputeWork(model_.program(), pipeline_step.computes, sharing_, model_.pipeline_rank())
          : std::vector<double>{});
  m.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  m.tokens_per_s = task_->TokensPerBatch() / m.seconds;
  return m;
}

std::vector<double> Trainer::TakeExpertLoads() const {
  std::vector<double> loads;
  std::map<std::string, size_t> offsets;
  for (const auto& [name, experts] : expert_blocks_) {
    offsets[name] = loads.size();
    loads.resize(loads.size() + experts + 1, 0.0);  // the load, then the copies dropped
  }
  for (MoeMlp* block : model_.ExpertBlocks()) {
    const auto it = offsets.find(block->prefix());
    CONVEYOR_ASSERT(it != offsets.end())
        << "rank " << model_.rank() << " holds the MoE block " << block->prefix()
        << ", which its model does not declare (ModelTask::ExpertBlocks)";
    const at::Tensor load = block->load().to(at::kDouble).contiguous();
    std::copy(load.data_ptr<double>(), load.data_ptr<double>() + load.numel(),
              loads.begin() + static_cast<int64_t>(it->second));
    loads[it->second + load.numel()] = static_cast<double>(block->dropped());
    block->ResetLoad();
  }
  return loads;
}

std::vector<double> Trainer::AuxiliaryLossValues(const PipelineRank& pipeline) const {
  std::vector<double> values(auxiliary_names_.size(), 0.0);
  for (const auto& [index, stage] : pipeline.stages()) {
    for (const auto& [name, value] : stage->auxiliary_losses()) {
      const auto it = std::find(auxiliary_names_.begin(), auxiliary_names_.end(), name);
      CONVEYOR_ASSERT(it != auxiliary_names_.end())
          << "rank " << model_.rank() << ", stage " << index << " attached the auxiliary loss \""
          << name << "\", which its model does not declare (ModelTask::AuxiliaryLossNames)";
      values[it - auxiliary_names_.begin()] += value;
    }
  }
  return values;
}

std::vector<RankReport> Trainer::RankReports(const StartupBreakdown& startup) const {
  RankReport mine = measurements_.Means(model_.rank());
  mine.startup = startup;
  mine.startup_s = std::max(startup_s_, 0.0);
  mine.peak_resident_bytes = static_cast<double>(PeakResidentBytes());
  mine.stage_build_s = model_.stage_build_s();
  return GatherRankReports(model_, mine, *recorder_);
}

}  // namespace conveyor
