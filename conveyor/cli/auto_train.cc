#include "conveyor/cli/auto_train.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>

#include "conveyor/cli/layer_cost_json.h"
#include "conveyor/cli/mesh_flags.h"
#include "conveyor/common/byte_size.h"
#include "conveyor/common/error.h"
#include "conveyor/common/range_check.h"
#include "conveyor/common/text.h"
#include "conveyor/launch/rendezvous.h"
#include "conveyor/train/layout_choice.h"

namespace conveyor {
namespace {

std::string Describe(const PlanCandidate& c) {
  return "dp x tp x pp " + MeshSizes(c) +
         Printf(", %s, %d chunk(s) a rank, %d micro-batches of %lld, recompute %s, ZeRO %d",
                c.schedule.c_str(), c.chunks, c.microbatches,
                static_cast<long long>(c.micro_batch_size),
                std::string(RecomputeName(c.recompute)).c_str(), c.zero) +
         ", layers a stage " + c.stage_layers;
}

}  // namespace

void AutoTrainFlags::Register(CLI::App* cmd) {
  CLI::Option* auto_flag = cmd->add_flag(
      "--auto", on,
      "choose the layout (dp x tp x pp, ep, schedule, micro-batches, stage split, recomputation, "
      "ZeRO) that fits --memory-per-rank and the simulator finds fastest on this machine");
  cmd->add_option("--world", world, "--auto: local ranks in all")->capture_default_str();
  cmd->add_option("--costs", costs,
                  "--auto: layer costs from `conveyor profile` (default: timed at the start)");
  for (const char* chosen :
       {"--pp", "--dp", "--tp", "--ep", "--cp", "--sequence-parallel", "--schedule",
        "--microbatches", "--chunks", "--recompute", "--zero", "--stage-layers", "--partition"}) {
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
  CheckLayoutDevices(config, world, rank_threads);
  const auto start = std::chrono::steady_clock::now();
  std::optional<LayerCostTable> costs;
  if (!flags.costs.empty()) costs = ReadLayerCostTable(flags.costs);
  const LayoutChoice choice = ChooseLayout(config, world, costs, [world](size_t sizes) {
    std::printf("auto: timing the model's layers here for %d ranks (%zu micro-batch sizes)...\n",
                world, sizes);
    std::fflush(stdout);
  });
  const AutoPlan& plan = choice.plan;
  const PlanCandidate& best = choice.best();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // Line by line: a split of many stages makes long lines.
  std::string text = "auto: " + Describe(best) + "\n";
  text += Printf(
      "auto: predicted %.1f ms a step, bubble %.1f%%, peak %s of the %s a rank "
      "(%s of it the data; %.0f%% of the limit kept free)\n",
      1e3 * best.step_s, 100 * std::max(0.0, best.bubble),
      ByteSize(best.peak_bytes + choice.data_bytes).c_str(), ByteSize(choice.limit).c_str(),
      ByteSize(choice.data_bytes).c_str(), 100 * (1 - kPlannedShare));
  text += "auto: from " +
          (flags.costs.empty()
               ? "the layers timed now (" +
                     (choice.gpu
                          ? choice.share_gpu ? Printf("%d ranks on one GPU", world) : "a GPU a rank"
                          : Printf("%d thread(s) a rank, %d ranks on %d cores", choice.threads,
                                   world, choice.cores)) +
                     (choice.request.shared_compute > 0
                          ? Printf(", which do the work of %.2f ranks alone)",
                                   choice.request.shared_compute)
                          : ")")
               : "--costs " + flags.costs) +
          Printf("; %lld layouts, %lld over the memory, %lld simulated, in %.1f s\n",
                 static_cast<long long>(plan.layouts), static_cast<long long>(plan.over_memory),
                 static_cast<long long>(plan.simulated), seconds);
  int shown = 0;
  for (size_t i = 0; i < plan.best.size() && shown < 2; ++i) {
    const PlanCandidate& c = plan.best[i];
    if (i == choice.chosen || (c.dp == best.dp && c.tp == best.tp && c.pp == best.pp &&
                               c.schedule == best.schedule && c.chunks == best.chunks)) {
      continue;  // show other layouts, not the same one with other micro-batches
    }
    text += "auto: next " + Describe(c) + Printf(": %.1f ms (", 1e3 * c.step_s) +
            (c.held_back.empty() ? "the trainer cannot run it" : c.held_back) + ")\n";
    ++shown;
  }
  std::fputs(text.c_str(), stdout);
  std::fflush(stdout);
  return choice.config;
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
  std::vector<std::string> layout = {"--dp",           std::to_string(c.dp),
                                     "--cp",           std::to_string(c.cp),
                                     "--tp",           std::to_string(c.tp),
                                     "--ep",           std::to_string(c.ep),
                                     "--pp",           std::to_string(c.pp),
                                     "--schedule",     c.schedule,
                                     "--microbatches", std::to_string(c.microbatches),
                                     "--chunks",       std::to_string(c.chunks),
                                     "--recompute",    std::string(RecomputeName(c.recompute)),
                                     "--zero",         std::to_string(c.zero),
                                     "--stage-layers", c.stage_layers};
  if (c.sequence_parallel) layout.push_back("--sequence-parallel");
  out.insert(out.end(), layout.begin(), layout.end());
  return out;
}

}  // namespace conveyor
