#include "conveyor/cli/auto_train.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "conveyor/cli/auto_plan.h"
#include "conveyor/cli/layer_cost_json.h"
#include "conveyor/common/error.h"
#include "conveyor/common/process_stats.h"
#include "conveyor/common/range_check.h"
#include "conveyor/common/text.h"
#include "conveyor/device/compute_device.h"
#include "conveyor/launch/rendezvous.h"
#include "conveyor/mesh/mesh.h"
#include "conveyor/profile/memory_tracker.h"
#include "conveyor/train/builtin_tasks.h"
#include "conveyor/train/layer_profile.h"

namespace conveyor {
namespace {

// The share of --memory-per-rank the planner may fill.
constexpr double kPlannedShare = 0.9;

std::string Describe(const PlanCandidate& c) {
  return Printf(
             "dp x tp x pp %d x %d x %d, %s, %d chunk(s) a rank, %d micro-batches of %lld, "
             "recompute %s, ZeRO %d",
             c.dp, c.tp, c.pp, c.schedule.c_str(), c.chunks, c.microbatches,
             static_cast<long long>(c.micro_batch_size),
             std::string(RecomputeName(c.recompute)).c_str(), c.zero) +
         ", layers a stage " + c.stage_layers;
}

TrainConfig WithLayout(TrainConfig config, const PlanCandidate& c) {
  config.dp = c.dp, config.tp = c.tp, config.pp = c.pp;
  config.schedule = c.schedule;
  config.microbatches = c.microbatches;
  config.chunks = c.chunks;
  config.recompute = c.recompute;
  config.zero = c.zero;
  config.stage_layers = c.stage_layers;
  return config;
}

}  // namespace

void AutoTrainFlags::Register(CLI::App* cmd) {
  CLI::Option* auto_flag = cmd->add_flag(
      "--auto", on,
      "choose the layout (dp x tp x pp, schedule, micro-batches, stage split, recomputation, "
      "ZeRO) that fits --memory-per-rank and the simulator finds fastest on this machine");
  cmd->add_option("--world", world, "--auto: local ranks in all")->capture_default_str();
  cmd->add_option("--costs", costs,
                  "--auto: layer costs from `conveyor profile` (default: timed at the start)");
  for (const char* chosen : {"--pp", "--dp", "--tp", "--schedule", "--microbatches", "--chunks",
                             "--recompute", "--zero", "--stage-layers", "--partition"}) {
    if (CLI::Option* option = cmd->get_option_no_throw(chosen)) auto_flag->excludes(option);
  }
}

TrainConfig ChooseTrainLayout(const TrainConfig& config, const AutoTrainFlags& flags,
                              bool rank_threads) {
  CONVEYOR_CHECK(!LaunchedAsRank())
      << "train --auto chooses the layout where the ranks start, and under a launcher (RANK is "
         "set) every process is a rank: plan with `conveyor plan --auto --costs FILE` and pass "
         "its layout (--dp --tp --pp --schedule --microbatches --stage-layers ...)";
  CheckInRange("--world", flags.world, 1, kMaxMeshRanks);
  const int world = static_cast<int>(flags.world);
  // Ranks on GPUs: a GPU each, or all of them threads sharing one (NCCL takes one process a
  // GPU, so ranks as processes cannot share one).
  const bool gpu = UsesCuda(config.device);
  const bool share_gpu = gpu && world > VisibleGpus();
  CONVEYOR_CHECK(!share_gpu || (rank_threads && VisibleGpus() == 1))
      << "train --auto --world " << world << " on " << VisibleGpus()
      << " GPU(s): ranks share a GPU only as threads of one process on one GPU "
         "(--rank-threads), else give each rank a GPU of its own (--world at most the GPUs)";
  CONVEYOR_CHECK(!gpu || config.memory_per_rank > 0)
      << "train --auto on GPUs needs --memory-per-rank (the bytes of GPU memory a rank may "
         "hold)";
  const auto start = std::chrono::steady_clock::now();
  const int cores = AvailableCores();
  const int threads = config.threads > 0 ? config.threads : std::max(1, cores / world);
  MemoryTracker::Install();
  LayerCostTable table;
  if (flags.costs.empty()) {
    const int before = at::get_num_threads();
    at::set_num_threads(threads);
    // Timed at 1 sequence, the largest micro-batch a replica can run (at most 16) and one
    // between: the costs are interpolated, not extrapolated.
    const int64_t largest = std::clamp<int64_t>(config.batch_size, 2, 16);
    std::vector<int64_t> sizes = {1, largest};
    if (largest >= 4) sizes.insert(sizes.begin() + 1, std::max<int64_t>(2, largest / 4));
    std::printf("auto: timing the model's layers here for %d ranks (%zu micro-batch sizes)...\n",
                world, sizes.size());
    std::fflush(stdout);
    table = ProfileLayerKinds(config, sizes, 5, gpu && !share_gpu ? 1 : world);
    at::set_num_threads(before);
  } else {
    table = ReadLayerCostTable(flags.costs);
  }
  // What the training data's tensors take on every rank, before any layer.
  const int64_t before_data = MemoryTracker::current_bytes();
  const int64_t data_bytes = [&] {
    const std::shared_ptr<TrainTask> task = MakeTask(config);
    // On GPUs the data stays in the host's memory.
    return gpu ? 0 : std::max<int64_t>(0, MemoryTracker::current_bytes() - before_data);
  }();
  const double limit = config.memory_per_rank > 0 ? static_cast<double>(config.memory_per_rank)
                                                  : PhysicalMemoryBytes() / world;

  AutoPlanRequest request;
  request.model = table.model;
  request.world = world;
  request.global_batch = config.batch_size;
  // A tenth of the limit stays free for what the prediction misses (the optimizer's and the
  // allocator's temporaries, timing of frees): the cap stops the run that needs it.
  request.memory_per_rank = kPlannedShare * limit - static_cast<double>(data_bytes);
  request.measured = table;
  request.bucket_bytes = static_cast<double>(DpBucketBytes(config, gpu));
  if (share_gpu) {
    ShareOneGpu(request);
  } else if (!gpu) {
    ShareOneCpu(request, cores);
  }
  request.max_microbatches = std::min(config.batch_size, 128);
  request.top = 1000;
  CONVEYOR_CHECK(request.memory_per_rank > 0)
      << "--memory-per-rank " << Size(limit) << " is less than the training data's "
      << Size(static_cast<double>(data_bytes));
  const AutoPlan plan = PlanAuto(request);
  CONVEYOR_CHECK(!plan.best.empty())
      << NoLayoutFits(request, plan) << "; planned for " << 100 * kPlannedShare
      << "% of --memory-per-rank " << Size(limit) << ", less the data's "
      << Size(static_cast<double>(data_bytes));
  size_t chosen = plan.best.size();
  TrainConfig out;
  for (size_t i = 0; i < plan.best.size() && chosen == plan.best.size(); ++i) {
    try {
      out = WithLayout(config, plan.best[i]);
      out.Validate();  // the trainer's own conditions (a vocabulary split over tp, ...)
      chosen = i;
    } catch (const UserError&) {
    }
  }
  CONVEYOR_CHECK(chosen < plan.best.size())
      << "no layout the planner found for " << world << " ranks is one the trainer runs";
  const PlanCandidate& best = plan.best[chosen];
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // Line by line: a split of many stages makes long lines.
  std::string text = "auto: " + Describe(best) + "\n";
  text += Printf(
      "auto: predicted %.1f ms a step, bubble %.1f%%, peak %s of the %s a rank "
      "(%s of it the data; %.0f%% of the limit kept free)\n",
      1e3 * best.step_s, 100 * std::max(0.0, best.bubble),
      Size(best.peak_bytes + static_cast<double>(data_bytes)).c_str(), Size(limit).c_str(),
      Size(static_cast<double>(data_bytes)).c_str(), 100 * (1 - kPlannedShare));
  text +=
      "auto: from " +
      (flags.costs.empty()
           ? "the layers timed now (" +
                 (gpu ? share_gpu ? Printf("%d ranks on one GPU", world) : "a GPU a rank"
                      : Printf("%d thread(s) a rank, %d ranks on %d cores", threads, world,
                               cores)) +
                 (request.shared_compute > 0
                      ? Printf(", which do the work of %.2f ranks alone)", request.shared_compute)
                      : ")")
           : "--costs " + flags.costs) +
      Printf("; %lld layouts, %lld over the memory, %lld simulated, in %.1f s\n",
             static_cast<long long>(plan.layouts), static_cast<long long>(plan.over_memory),
             static_cast<long long>(plan.simulated), seconds);
  int shown = 0;
  for (size_t i = 0; i < plan.best.size() && shown < 2; ++i) {
    const PlanCandidate& c = plan.best[i];
    if (i == chosen || (c.dp == best.dp && c.tp == best.tp && c.pp == best.pp &&
                        c.schedule == best.schedule && c.chunks == best.chunks)) {
      continue;  // show other layouts, not the same one with other micro-batches
    }
    text += "auto: next " + Describe(c) + Printf(": %.1f ms (", 1e3 * c.step_s) +
            (c.held_back.empty() ? "the trainer cannot run it" : c.held_back) + ")\n";
    ++shown;
  }
  std::fputs(text.c_str(), stdout);
  std::fflush(stdout);
  return out;
}

std::vector<std::string> ArgsWithLayout(const std::vector<std::string>& args,
                                        const TrainConfig& c) {
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--auto") continue;
    if (a == "--world" || a == "--costs") {
      ++i;  // and its value
      continue;
    }
    if (a.rfind("--world=", 0) == 0 || a.rfind("--costs=", 0) == 0) continue;
    out.push_back(a);
  }
  const std::vector<std::string> layout = {
      "--dp",           std::to_string(c.dp),
      "--tp",           std::to_string(c.tp),
      "--pp",           std::to_string(c.pp),
      "--schedule",     c.schedule,
      "--microbatches", std::to_string(c.microbatches),
      "--chunks",       std::to_string(c.chunks),
      "--recompute",    std::string(RecomputeName(c.recompute)),
      "--zero",         std::to_string(c.zero),
      "--stage-layers", c.stage_layers};
  out.insert(out.end(), layout.begin(), layout.end());
  return out;
}

}  // namespace conveyor
