#include "conveyor/train/layout_choice.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "conveyor/common/byte_size.h"
#include "conveyor/common/error.h"
#include "conveyor/common/process_stats.h"
#include "conveyor/device/compute_device.h"
#include "conveyor/profile/memory_tracker.h"
#include "conveyor/train/builtin_tasks.h"
#include "conveyor/train/layer_profile.h"

namespace conveyor {
namespace {

// Whether `world` ranks on config.device are on GPUs, and then whether they share one (NCCL
// takes one process a GPU, so only threads of one process can).
struct RankDevices {
  bool gpu;
  bool share_gpu;
};

RankDevices DevicesOf(const TrainConfig& config, int world) {
  const bool gpu = UsesCuda(config.device);
  return {gpu, gpu && world > VisibleGpus()};
}

TrainConfig WithLayout(TrainConfig config, const PlanCandidate& c) {
  config.dp = c.dp, config.tp = c.tp, config.pp = c.pp, config.ep = c.ep, config.cp = c.cp;
  config.sequence_parallel = c.sequence_parallel;
  config.schedule = c.schedule;
  config.microbatches = c.microbatches;
  config.chunks = c.chunks;
  config.recompute = c.recompute;
  config.zero = c.zero;
  config.stage_layers = c.stage_layers;
  return config;
}

}  // namespace

void CheckLayoutDevices(const TrainConfig& config, int world, bool rank_threads) {
  const RankDevices devices = DevicesOf(config, world);
  CONVEYOR_CHECK(!devices.share_gpu || (rank_threads && VisibleGpus() == 1))
      << "train --auto --world " << world << " on " << VisibleGpus()
      << " GPU(s): ranks share a GPU only as threads of one process on one GPU "
         "(--rank-threads), else give each rank a GPU of its own (--world at most the GPUs)";
  CONVEYOR_CHECK(!devices.gpu || config.memory_per_rank > 0)
      << "train --auto on GPUs needs --memory-per-rank (the bytes of GPU memory a rank may "
         "hold)";
}

LayoutChoice ChooseLayout(const TrainConfig& config, int world,
                          const std::optional<LayerCostTable>& costs,
                          const std::function<void(size_t sizes)>& timing) {
  LayoutChoice choice;
  const RankDevices devices = DevicesOf(config, world);
  choice.gpu = devices.gpu;
  choice.share_gpu = devices.share_gpu;
  choice.cores = AvailableCores();
  choice.threads = config.threads > 0 ? config.threads : std::max(1, choice.cores / world);
  MemoryTracker::Install();
  LayerCostTable table;
  if (costs.has_value()) {
    table = *costs;
  } else {
    const int before = at::get_num_threads();
    at::set_num_threads(choice.threads);
    // Timed at 1 sequence, the largest micro-batch a replica can run (at most 16) and one
    // between: the costs are interpolated, not extrapolated.
    const int64_t largest = std::clamp<int64_t>(config.batch_size, 2, 16);
    std::vector<int64_t> sizes = {1, largest};
    if (largest >= 4) sizes.insert(sizes.begin() + 1, std::max<int64_t>(2, largest / 4));
    timing(sizes.size());
    table = ProfileLayerKinds(config, sizes, 5, choice.gpu && !choice.share_gpu ? 1 : world);
    at::set_num_threads(before);
  }
  // What the training data's tensors take on every rank, before any layer.
  const int64_t before_data = MemoryTracker::current_bytes();
  choice.data_bytes = static_cast<double>([&] {
    const std::shared_ptr<TrainTask> task = MakeTask(config);
    // On GPUs the data stays in the host's memory.
    return choice.gpu ? 0 : std::max<int64_t>(0, MemoryTracker::current_bytes() - before_data);
  }());
  choice.limit = config.memory_per_rank > 0 ? static_cast<double>(config.memory_per_rank)
                                            : PhysicalMemoryBytes() / world;

  AutoPlanRequest& request = choice.request;
  request.model = table.model;
  request.world = world;
  request.global_batch = config.batch_size;
  request.memory_per_rank = kPlannedShare * choice.limit - choice.data_bytes;
  request.measured = table;
  request.bucket_bytes = static_cast<double>(DpBucketBytes(config, choice.gpu));
  // The executor runs DualPipe's pairs at once on the CPU (PipelineModel::overlaps_pairs).
  request.pairs_at_once = !choice.gpu && !config.sequential_pairs;
  request.context_parallel = config.model.kind == ModelKind::kLlama && config.model.experts == 0;
  if (choice.share_gpu) {
    ShareOneGpu(request);
  } else if (!choice.gpu) {
    ShareOneCpu(request, choice.cores);
  }
  request.max_microbatches = std::min(config.batch_size, 128);
  request.top = 1000;
  CONVEYOR_CHECK(request.memory_per_rank > 0)
      << "--memory-per-rank " << ByteSize(choice.limit) << " is less than the training data's "
      << ByteSize(choice.data_bytes);
  choice.plan = PlanAuto(request);
  const AutoPlan& plan = choice.plan;
  CONVEYOR_CHECK(!plan.best.empty())
      << NoLayoutFits(request, plan) << "; planned for " << 100 * kPlannedShare
      << "% of --memory-per-rank " << ByteSize(choice.limit) << ", less the data's "
      << ByteSize(choice.data_bytes);
  choice.chosen = plan.best.size();
  for (size_t i = 0; i < plan.best.size() && choice.chosen == plan.best.size(); ++i) {
    try {
      choice.config = WithLayout(config, plan.best[i]);
      choice.config.Validate();  // the trainer's own conditions (a vocabulary split over tp, ...)
      choice.chosen = i;
    } catch (const UserError&) {
    }
  }
  CONVEYOR_CHECK(choice.chosen < plan.best.size())
      << "no layout the planner found for " << world << " ranks is one the trainer runs";
  return choice;
}

}  // namespace conveyor
