#include "conveyor/train/trainer.h"

#include <ATen/ATen.h>
#include <c10/core/impl/VirtualGuardImpl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "conveyor/device/compute_precision.h"
#include "conveyor/comm/hop_latency.h"
#include "conveyor/device/stream_order.h"
#include "conveyor/launch/rendezvous.h"
#include "conveyor/module/microbatch.h"
#include "conveyor/nn/layer.h"
#include "conveyor/profile/comm_breakdown.h"
#include "conveyor/profile/memory_tracker.h"
#include "conveyor/schedule/lower.h"
#include "conveyor/schedule/registry.h"
#include "conveyor/schedule/verify.h"
#include "conveyor/device/compute_device.h"
#include "conveyor/train/layer_costs.h"
#include "conveyor/train/sharded_adamw.h"
#include "conveyor/train/sum_over_ranks.h"

namespace conveyor {
namespace {

// Which ranks hold each parameter name, from the layers and the partition alone.
std::map<std::string, std::vector<int>> Holders(const Layout& layout, const LayerList& layers,
                                                const std::vector<LayerRange>& partition) {
  std::map<std::string, std::vector<int>> holders;
  for (int s = 0; s < layout.num_stages(); ++s) {
    const LayerRange& range = partition[layout.part_of(s)];
    for (int l = range.begin; l < range.end; ++l) {
      for (const auto& [name, p] : layers[l]->NamedParameters()) {
        holders[name].push_back(layout.rank_of(s));
      }
    }
  }
  return holders;
}

// This rank's index among the ranks of its machine: the launcher's, for a process; the
// world rank, for ranks as threads of this process.
int LocalRank(int rank) { return LaunchedAsRank() ? RendezvousFromEnvironment().local_rank : rank; }

// Makes `device` the calling thread's current device and a stream of its own from the pool
// its current stream (both stay after the call). Nothing on the CPU.
void ComputeOn(const c10::Device& device) {
  const std::optional<c10::Stream> stream = StreamFromPool(device);
  if (!stream) return;
  c10::impl::VirtualGuardImpl guard(device.type());
  guard.setDevice(device);
  guard.exchangeStream(*stream);
}

// Gradient bytes per data-parallel all-reduce.
constexpr int64_t kBucketBytes = 4 << 20;

Mesh MakeMesh(const TrainConfig& c, Transport* world) {
  return Mesh::Make(world != nullptr ? world->world_size() : 1, c.dp, c.tp, c.pp,
                    Mesh::ParseOrder(c.mesh_order));
}

// Creates every group along `axis`, in Mesh::Groups' order (collective over `world`), and
// returns this rank's. None (null) when the groups would be single ranks, unless `singles`,
// or the whole world.
std::unique_ptr<Transport> CreateGroups(Transport* world, const Mesh& mesh, MeshAxis axis,
                                        bool singles) {
  const int extent = mesh.extent(axis);
  if (world == nullptr || extent == mesh.size() || (extent == 1 && !singles)) return nullptr;
  std::unique_ptr<Transport> mine;
  for (const std::vector<int>& ranks : mesh.Groups(axis)) {
    std::unique_ptr<Transport> group = world->NewGroup(ranks);
    if (group != nullptr) mine = std::move(group);
  }
  return mine;
}

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

}  // namespace

Trainer::Trainer(const TrainConfig& config, std::shared_ptr<const TrainTask> task, Transport* world)
    : config_(config),
      task_(std::move(task)),
      world_(world),
      rank_(world != nullptr ? world->rank() : 0),
      device_(ComputeDevice(config.device, rank_, LocalRank(rank_))),
      mesh_(MakeMesh(config, world)),
      coords_(mesh_.coords(rank_)),
      program_(BuildSchedule(config.schedule,
                             ScheduleOptions{config.pp, config.microbatches, config.chunks})),
      schedule_{config.lr, config.min_lr_ratio, config.warmup_steps, config.steps},
      loss_scaler_(MakeLossScaler(config)) {
  config_.Validate();
  ComputeOn(device_);
  CONVEYOR_CHECK(config_.dtype == ComputeDtype::kFp32 ||
                 AutocastComputesIn(device_, ScalarTypeOf(config_.dtype)))
      << "rank " << rank_ << ": --dtype " << ComputeDtypeName(config_.dtype) << " needs "
      << ComputeDtypeName(config_.dtype) << " matrix products under autocast on " << device_.str()
      << ", which this libtorch does not have"
      << (config_.dtype == ComputeDtype::kFp16
              ? " (Debian 12's libtorch 1.13 has no fp16 product on the CPU): use --dtype bf16, "
                "or a GPU"
              : ": use --dtype fp32");
  MemoryTracker::Install();
  VerifyOrThrow(program_);
  program_ = Lower(program_);
  // The groups, in one order on every rank: TP, DP, pipelines.
  tp_owned_ = CreateGroups(world, mesh_, MeshAxis::kTp, false);
  dp_owned_ = CreateGroups(world, mesh_, MeshAxis::kDp, false);
  pp_owned_ = CreateGroups(world, mesh_, MeshAxis::kPp, true);
  auto group = [&](const std::unique_ptr<Transport>& owned, MeshAxis axis) -> Transport* {
    if (owned != nullptr) return owned.get();
    return mesh_.extent(axis) == mesh_.size() ? world : nullptr;
  };
  auto timed = [](Transport* g, std::unique_ptr<TimedTransport>& t) -> Transport* {
    if (g == nullptr) return nullptr;
    t = std::make_unique<TimedTransport>(g);
    return t.get();
  };
  tp_group_ = timed(group(tp_owned_, MeshAxis::kTp), tp_timed_);
  dp_group_ = timed(mesh_.dp() > 1 ? group(dp_owned_, MeshAxis::kDp) : nullptr, dp_timed_);
  pipeline_group_ = group(pp_owned_, MeshAxis::kPp);
  tp_ = TensorParallel{mesh_.tp(), coords_.tp, mesh_.tp() > 1 ? tp_group_ : nullptr};
  if (dp_group_ != nullptr) program_ = WithGradReductions(program_);
  const AdamWOptions adamw{.weight_decay = config.weight_decay};
  if (config_.zero == 1 && dp_group_ != nullptr) {
    optimizer_ = std::make_unique<ShardedAdamW>(adamw, dp_group_);
  } else {
    optimizer_ = std::make_unique<AdamW>(adamw);
  }
  const Layout& layout = program_.layout;
  const LayerList layers = task_->BuildLayers({});  // the whole model: names and costs
  std::vector<double> costs = LayerCosts(config_, *task_, layers);
  if (config_.partition == PartitionBy::kProfile && world != nullptr && world->world_size() > 1) {
    // Timings differ between ranks: every rank must cut at the same places.
    const at::Tensor sum = SumOverRanks(world, at::tensor(costs, at::kDouble));
    for (size_t l = 0; l < costs.size(); ++l) {
      costs[l] = sum[l].item<double>() / world->world_size();
    }
  }
  partition_ = Partition(costs, layout.pipeline_length());
  auto task_ref = task_;
  auto ranges = partition_;
  // Activations and their gradients cross between stages in the compute dtype: half the
  // bytes under bf16 / fp16; weights, gradients and reductions stay fp32.
  const at::ScalarType message_dtype = ScalarTypeOf(config_.dtype);
  pipeline_ = std::make_unique<PipelineRank>(
      program_, pipeline_rank(), pipeline_group_,
      [task_ref, ranges, &layout, tp = tp_, device = device_](int stage) {
        const LayerList all = task_ref->BuildLayers(tp);
        const LayerRange& r = ranges[layout.part_of(stage)];
        auto stack =
            std::make_unique<LayerStack>(LayerList(all.begin() + r.begin, all.begin() + r.end));
        MoveParameters(stack->NamedParameters(), device);
        return stack;
      },
      at::TensorOptions().dtype(message_dtype).device(device_));
  for (const auto& [index, stage] : pipeline_->stages()) {
    stage->set_recompute(config_.recompute == Recompute::kFull);
    stage->set_compute_dtype(ScalarTypeOf(config_.dtype));
    stage->set_message_dtype(message_dtype);
  }
  const auto holders = Holders(layout, layers, partition_);
  // ZeRO-1: the reducer reduce-scatters the gradients of the unshared parameters over
  // ShardedAdamW's ranges (shard_layout.h); the shared ones stay whole for SumShared.
  std::shared_ptr<const ShardLayout> zero;
  if (config_.zero == 1 && dp_group_ != nullptr) {
    zero = std::make_shared<const ShardLayout>(Parameters(), dp_group_->world_size(),
                                               dp_group_->rank(), GradSync::SharedNames(holders));
  }
  if (dp_group_ != nullptr) {
    dp_reducer_ = std::make_unique<DataParallelReducer>(dp_group_, kBucketBytes, zero);
    pipeline_->executor().set_reduce_grad_hook(
        [this](Stage& stage) { dp_reducer_->Start(stage.module().NamedParameters()); });
  }
  grad_sync_ = std::make_unique<GradSync>(pipeline_group_, holders, tp_,
                                          zero != nullptr ? dp_group_ : nullptr, zero);
  clock_origin_ = SharedClockOrigin(world);
  recorder_ =
      std::make_unique<StepRecorder>(pipeline_rank(), layout.num_ranks(), clock_origin_, device_);
  recorder_->Attach(pipeline_->executor());
  if (pipeline_group_ != nullptr && pipeline_group_->world_size() > 1) {
    const int64_t samples =
        (config_.batch_size / mesh_.dp() + config_.microbatches - 1) / config_.microbatches;
    hop_s_ =
        MeasureHopLatency(*pipeline_group_,
                          c10::elementSize(message_dtype) * samples * config_.seq_len * config_.hidden,
                          20);
  }
}

StepMetrics Trainer::Step() {
  const auto start = std::chrono::steady_clock::now();
  const NamedTensors params = Parameters();
  for (const auto& [name, p] : params) p.mutable_grad() = at::Tensor();
  // This replica's slice of the batch; every loss is divided by the whole batch's targets.
  const Batch batch = task_->TrainBatch(step_);
  const Batch mine =
      ToDevice(mesh_.dp() > 1 ? SliceBatch(batch, coords_.dp, mesh_.dp()) : batch, device_);
  StepMetrics m;
  m.loss_scale = loss_scaler_.scale();
  for (const auto& [index, stage] : pipeline_->stages()) stage->set_loss_scale(m.loss_scale);
  recorder_->BeginStep();
  // From here on, the collectives of this step (not those of evaluations or checkpoints).
  if (tp_timed_ != nullptr) tp_timed_->TakeSpans();
  if (dp_timed_ != nullptr) dp_timed_->TakeSpans();
  const double pipeline_start = Executor::Now() - clock_origin_;
  const double local_loss =
      pipeline_->Step(SplitBatch(mine, config_.microbatches, CountTargets(batch.targets)));
  const double pipeline_end = Executor::Now() - clock_origin_;
  recorder_->UseDeviceTimes(pipeline_->executor().device_runs());
  const int64_t pipeline_peak_bytes = recorder_->PeakBytes();  // before the optimizer's state

  double phase = Executor::Now();
  if (dp_reducer_ != nullptr) {
    m.dp = dp_reducer_->Finish();
    recorder_->Phase("dp reduce wait", phase);
  }
  phase = Executor::Now();
  grad_sync_->SumShared(params);
  recorder_->Phase("sum shared grads", phase);
  phase = Executor::Now();
  m.grad_norm = grad_sync_->GlobalNorm(params) / m.loss_scale;  // of the true gradients
  recorder_->Phase("grad norm", phase);
  // One row per rank: the posting time of each send this rank made (zero for the others'
  // sends; the comm breakdown needs all of them), its start and end of the pipeline, and its
  // loss. Gathered before the update, so that every rank knows whether the step is finite.
  phase = Executor::Now();
  const Layout& layout = program_.layout;
  std::vector<double> row = SendPostTimes(layout, recorder_->step());
  const int64_t posts = static_cast<int64_t>(row.size());
  row.insert(row.end(), {pipeline_start, pipeline_end, local_loss});
  const at::Tensor rows =
      GatherOverRanks(pipeline_group_, at::tensor(row, at::kDouble));  // (p, posts + 3)
  const at::Tensor post_sums = rows.narrow(1, 0, posts).sum(0).contiguous();
  const std::vector<double> post_times(post_sums.data_ptr<double>(),
                                       post_sums.data_ptr<double>() + posts);
  const double first = rows.select(1, posts).min().item<double>();
  const double last = rows.select(1, posts + 1).max().item<double>();
  m.loss = SumOverRanks(dp_group_, rows.select(1, posts + 2).sum().reshape({1}))
               .item<double>();  // every replica's share of the batch
  recorder_->Phase("gather loss", phase);
  m.step = step_ + 1;
  m.lr = schedule_.At(m.step);
  m.skipped = !std::isfinite(m.loss) || !std::isfinite(m.grad_norm);
  m.overflow = m.skipped && std::isfinite(m.loss) && loss_scaler_.ShouldBackOff();
  CONVEYOR_CHECK(!m.skipped || m.overflow || config_.skip_nonfinite_steps)
      << "step " << m.step << ": the loss is " << m.loss << " and the gradient norm " << m.grad_norm
      << "; stopping before the update (a learning rate too high, or weights "
      << "that hold NaN or inf; --skip-nonfinite-steps skips such steps instead)";
  phase = Executor::Now();
  if (m.overflow) loss_scaler_.BackOff();
  if (!m.skipped) {
    // Unscaled and clipped in one pass over the gradients.
    double factor = 1 / m.loss_scale;
    if (config_.clip > 0 && m.grad_norm > config_.clip) {
      factor *= config_.clip / (m.grad_norm + 1e-6);
    }
    if (factor != 1) GradSync::Scale(params, factor);
    optimizer_->Step(params, m.lr, m.step);
    loss_scaler_.Grow();
  }
  step_ = m.step;
  recorder_->Phase("optimizer", phase);
  AxisCommTimes axes;
  if (dp_timed_ != nullptr) {
    axes.dp_s = RecordCollectives(dp_timed_->TakeSpans(), PhaseTrack::kDataParallel, *recorder_);
    // Exposed: the collectives on this thread (the reducer's are m.dp.comm_s of dp_s) and the
    // reducer's that the optimizer waited for (at most all of them: the wait also covers
    // the reducer thread's copies and wake-up).
    axes.dp_exposed_s =
        std::clamp(axes.dp_s - m.dp.comm_s + std::min(m.dp.exposed_s, m.dp.comm_s), 0.0, axes.dp_s);
  }
  if (tp_timed_ != nullptr) {
    axes.tp_s = RecordCollectives(tp_timed_->TakeSpans(), PhaseTrack::kTensorParallel, *recorder_);
  }
  totals_.Add(recorder_->step(), pipeline_->executor().last_stats(),
              BreakDownComm(layout, recorder_->step(), pipeline_rank(), post_times), last - first,
              pipeline_peak_bytes, axes);
  m.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  m.tokens_per_s = task_->TokensPerBatch() / m.seconds;
  return m;
}

}  // namespace conveyor
