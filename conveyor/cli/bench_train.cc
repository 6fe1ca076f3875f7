#include "conveyor/cli/bench_train.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "conveyor/cli/bench_support.h"
#include "conveyor/cli/metrics_json.h"
#include "conveyor/cli/run_as_ranks.h"
#include "conveyor/cli/train_flags.h"
#include "conveyor/common/error.h"
#include "conveyor/launch/launcher.h"
#include "conveyor/train/builtin_tasks.h"
#include "conveyor/train/measured_costs.h"
#include "conveyor/train/preflight.h"
#include "conveyor/train/rank_report.h"
#include "conveyor/train/trainer.h"

namespace conveyor {
namespace {

// The flags of `bench train`: the train flags and these.
struct BenchTrainFlags {
  TrainFlags train;
  std::string schedules;  // comma-separated; empty = all
  bool single = true;
  BenchOutput output;
};

// Runs `steps` steps: the median seconds of those after the first (of the only one when
// steps == 1), and the tokens per second at that median.
nlohmann::json TrainRow(Trainer& trainer, const TrainTask& task, int steps) {
  std::vector<double> seconds;
  for (int k = 0; k < steps; ++k) {
    const double s = trainer.Step().seconds;
    if (k > 0 || steps == 1) seconds.push_back(s);
  }
  const double step_s = Median(seconds);
  return {{"step_s", step_s}, {"tokens_per_s", task.TokensPerBatch() / step_s}};
}

nlohmann::json BenchSchedule(const RankContext& rank, TrainConfig config, const std::string& name) {
  config.schedule = name;
  config.chunks = 0;
  try {
    PreflightCheck(config);
  } catch (const UserError& e) {
    return {{"schedule", name}, {"skipped", e.what()}};
  }
  const auto task = MakeTask(config);
  Trainer trainer(config, task, rank);
  nlohmann::json row = TrainRow(trainer, *task, static_cast<int>(config.steps));
  const std::vector<RankReport> ranks = trainer.RankReports();
  row["schedule"] = name;
  row["pp"] = config.pp;
  row["dp"] = trainer.model().mesh().dp();
  row["tp"] = config.tp;
  row["microbatches"] = config.microbatches;
  const int pp = trainer.model().program().layout.num_ranks();
  row["measured_bubble_fraction"] =
      MeasuredBubble(ranks, trainer.measurements().pipeline_s(), trainer.sharing().Room(pp) / pp);
  const SimResult predicted = PredictFromMeasuredCosts(trainer);
  row["predicted_bubble_fraction"] = predicted.bubble_fraction;
  // The step with its pipeline part as fast as the simulator says the schedule allows.
  double pipeline_s = 0;
  for (const RankReport& r : ranks) pipeline_s = std::max(pipeline_s, r.step_s);
  const double limit_s = row["step_s"].get<double>() - pipeline_s + predicted.makespan;
  row["predicted_tokens_per_s"] = task->TokensPerBatch() / limit_s;
  row["transfer_wait_fraction"] = ExposedCommFraction(ranks);
  double peak = 0, predicted_peak = 0;
  for (const RankReport& r : ranks) {
    peak = std::max(peak, r.peak_activation_bytes);
    predicted_peak = std::max(predicted_peak, r.predicted_peak_activation_bytes);
  }
  row["peak_activation_bytes"] = peak;
  row["predicted_peak_activation_bytes"] = predicted_peak;
  row["ranks"] = RankRowsJson(ranks);
  return row;
}

// The same model in this process alone (dp = tp = pp = 1), with as many intra-op threads as
// the mesh's ranks have together.
nlohmann::json BenchSingleProcess(TrainConfig config, int threads) {
  config.pp = 1;
  config.dp = 1;
  config.tp = 1;
  config.schedule = "gpipe";
  config.chunks = 0;
  const int before = at::get_num_threads();
  at::set_num_threads(threads);
  const auto task = MakeTask(config);
  Trainer trainer(config, task, InProcessRank(nullptr, config.device));
  nlohmann::json row = TrainRow(trainer, *task, static_cast<int>(config.steps));
  at::set_num_threads(before);
  row["schedule"] = "single process";
  row["pp"] = 1;
  row["dp"] = 1;
  row["tp"] = 1;
  row["threads"] = threads;
  return row;
}

std::string TrainTable(const nlohmann::json& rows) {
  double single = 0;
  for (const auto& row : rows) {
    if (row["schedule"] == "single process") single = row["tokens_per_s"].get<double>();
  }
  const std::string header =
      Printf("%-17s %9s %9s %9s %9s %9s %9s %8s %9s %9s\n", "schedule", "step ms", "tokens/s",
             "limit", "vs 1 proc", "bubble", "predicted", "exposed", "peak MiB", "predicted");
  return BenchTable(rows, header, [single](const nlohmann::json& row) {
    const std::string name = row["schedule"];
    const double tokens = row["tokens_per_s"].get<double>();
    std::string ratio = single > 0 ? std::to_string(tokens / single).substr(0, 4) + "x" : "-";
    if (name == "single process") {
      return Printf("%-17s %9.1f %9.0f %9s %9s   (%d threads)\n", name.c_str(),
                    1e3 * row["step_s"].get<double>(), tokens, "", ratio.c_str(),
                    row["threads"].get<int>());
    }
    return Printf("%-17s %9.1f %9.0f %9.0f %9s %8.1f%% %8.1f%% %7.1f%% %9.2f %9.2f\n", name.c_str(),
                  1e3 * row["step_s"].get<double>(), tokens,
                  row["predicted_tokens_per_s"].get<double>(), ratio.c_str(),
                  100 * row["measured_bubble_fraction"].get<double>(),
                  100 * row["predicted_bubble_fraction"].get<double>(),
                  100 * row["transfer_wait_fraction"].get<double>(),
                  row["peak_activation_bytes"].get<double>() / (1 << 20),
                  row["predicted_peak_activation_bytes"].get<double>() / (1 << 20));
  });
}

}  // namespace

void AddBenchTrain(CLI::App& bench, const std::vector<std::string>& args, int* exit_code) {
  auto flags = std::make_shared<BenchTrainFlags>();
  CLI::App* cmd = bench.add_subcommand(
      "train", "a quick run of your training configuration under each schedule and in one process");
  RegisterTrainFlags(cmd, flags->train);
  cmd->add_option("--schedules", flags->schedules, "comma-separated names (default: all)");
  cmd->add_flag("!--no-single", flags->single, "skip the single-process run");
  flags->output.Register(cmd);
  cmd->footer(
      "Steps per schedule: --steps if given, else 5 (the first is not timed). Evaluation,\n"
      "checkpoints, sampling and --schedule are not used.");
  cmd->callback([flags, args, exit_code, cmd] {
    TrainConfig config = ResolveTrainConfig(flags->train);
    if (cmd->get_option("--steps")->count() == 0) config.steps = 5;
    config.eval_every = 0;
    config.sample_tokens = 0;
    config.checkpoint_dir.clear();
    config.resume.clear();
    config.metrics.clear();
    config.trace.clear();
    config.tensorboard.clear();
    const std::vector<std::string> names = SelectedSchedules(flags->schedules);
    // Progress on stderr, the table on stdout.
    const RanksOptions options = MeshRanksOptions(config, flags->train.launch);
    if (!LaunchedByConveyor()) PreflightFiles(config);  // as in `conveyor train`
    *exit_code = RunAsRanks(args, options, [&](const RankContext& rank) {
      Transport& transport = *rank.world;
      const bool leader = rank.rank == 0;
      nlohmann::json rows = nlohmann::json::array();
      for (const std::string& name : names) {
        if (leader) std::fprintf(stderr, "bench train: %s\n", name.c_str());
        rows.push_back(BenchSchedule(rank, config, name));
      }
      if (flags->single) {
        // Rank 0 alone; the others wait for it.
        if (leader) {
          std::fprintf(stderr, "bench train: single process\n");
          rows.push_back(
              BenchSingleProcess(config, at::get_num_threads() * transport.world_size()));
        }
        transport.Barrier();
      }
      if (leader) flags->output.Write(rows, TrainTable);
    });
  });
}

}  // namespace conveyor
