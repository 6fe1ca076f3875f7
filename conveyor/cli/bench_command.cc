#include "conveyor/cli/bench_command.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "conveyor/cli/distributed.h"
#include "conveyor/cli/launch_flags.h"
#include "conveyor/cli/metrics_json.h"
#include "conveyor/cli/output.h"
#include "conveyor/cli/train_flags.h"
#include "conveyor/comm/hop_latency.h"
#include "conveyor/common/error.h"
#include "conveyor/common/range_check.h"
#include "conveyor/profile/memory_tracker.h"
#include "conveyor/profile/step_recorder.h"
#include "conveyor/runtime/pipeline_rank.h"
#include "conveyor/runtime/synthetic_stage.h"
#include "conveyor/schedule/lower.h"
#include "conveyor/schedule/pipeline_limits.h"
#include "conveyor/schedule/registry.h"
#include "conveyor/sim/simulator.h"
#include "conveyor/train/measured_costs.h"
#include "conveyor/train/preflight.h"
#include "conveyor/train/rank_metrics.h"
#include "conveyor/train/tasks.h"
#include "conveyor/train/trainer.h"

namespace conveyor::cli {
namespace {

// Numbers as 64 bits: a value too large for an int is refused by name, not wrapped.
struct BenchFlags {
  bool overhead = false;
  int64_t pp = 4;
  int64_t microbatches = 8;
  double f = 0.02, i = 0.02, w = 0.02;
  int64_t steps = 3;
  std::string schedules;  // comma-separated; empty = all
  std::string format = "text";
  std::string out;
  int64_t timeout_s = 120;
  LaunchFlags launch;
};

std::vector<std::string> Selected(const std::string& list) {
  std::vector<std::string> names;
  if (list.empty()) {
    for (const ScheduleInfo& info : AllSchedules()) names.emplace_back(info.name);
    return names;
  }
  std::stringstream in(list);
  std::string name;
  while (std::getline(in, name, ',')) {
    FindSchedule(name);  // fails early on a typo
    names.push_back(name);
  }
  return names;
}

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

// Per step, over the ranks: the slowest rank's time, and the most time a rank spent in the
// executor itself (the step less its stages' compute and its waits for messages).
struct StepTimes {
  std::vector<double> slowest;
  std::vector<double> executor;
};

// Times `steps` steps, recording each when `recorder` is set.
StepTimes TimeSteps(Transport& transport, PipelineRank& rank, const std::vector<MicroBatch>& mbs,
                    int steps, StepRecorder* recorder) {
  StepTimes times;
  for (int k = 0; k < steps; ++k) {
    transport.Barrier();
    const auto start = std::chrono::steady_clock::now();
    if (recorder != nullptr) recorder->BeginStep();
    rank.Step(mbs);
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const StepStats& stats = rank.executor().last_stats();
    std::vector<at::Tensor> all = {at::zeros({2, transport.world_size()}, at::kDouble)};
    all[0][0][transport.rank()] = elapsed;
    all[0][1][transport.rank()] = stats.seconds - stats.compute_s - stats.comm_wait_s;
    transport.AllReduceSum(all);
    times.slowest.push_back(all[0][0].max().item<double>());
    times.executor.push_back(all[0][1].max().item<double>());
  }
  return times;
}

// With `traced`, each step also runs under a StepRecorder (and its counting allocator).
// `hop_s`: the measured one-way time of a message between neighbours, which the prediction
// charges on every message that crosses ranks.
nlohmann::json MeasureOne(Transport& transport, const BenchFlags& flags, const std::string& name,
                          bool traced, double hop_s) {
  Program program(Layout::Loop(1, 1, 1));
  try {
    const ScheduleOptions options =
        CheckScheduleOptions(flags.pp, flags.microbatches, /*chunks=*/0);
    CheckPipelineSize(name, options);
    program = BuildSchedule(name, options);
  } catch (const UserError& e) {
    return {{"schedule", name}, {"skipped", e.what()}};
  }
  const Program lowered = Lower(program);
  const SyntheticCosts costs{flags.f, flags.i, flags.w};
  PipelineRank rank(
      lowered, transport.rank(), &transport,
      [&](int stage) { return MakeSyntheticStage(stage, costs); },
      at::TensorOptions().dtype(at::kFloat));
  Batch batch;
  batch.inputs = at::zeros({flags.microbatches, 1}, at::kLong);
  batch.targets = at::zeros({flags.microbatches, 1}, at::kLong);
  const std::vector<MicroBatch> mbs = SplitBatch(batch, flags.microbatches);
  std::unique_ptr<StepRecorder> recorder;
  if (traced) {
    recorder = std::make_unique<StepRecorder>(transport.rank(), flags.pp, Executor::Now());
    recorder->Attach(rank.executor());
  }
  rank.Step(mbs);  // warm-up: connections, allocator
  const StepTimes times = TimeSteps(transport, rank, mbs, flags.steps, recorder.get());
  const double measured = Median(times.slowest);

  size_t most_actions = 0;
  for (const auto& actions : lowered.ranks) most_actions = std::max(most_actions, actions.size());
  nlohmann::json row = {{"schedule", name},
                        {"pp", flags.pp},
                        {"microbatches", flags.microbatches},
                        {"measured_s", measured},
                        {"actions_per_rank", most_actions}};
  if (flags.overhead) {
    row["us_per_action"] = 1e6 * measured / static_cast<double>(most_actions);
    row["executor_us_per_action"] =
        1e6 * Median(times.executor) / static_cast<double>(most_actions);
  } else {
    CostModel model;
    model.uniform = StageCost{flags.f, flags.i, flags.w};
    const double compute_only = Simulate(program, model, SimOptions{1}).makespan;
    model.comm_latency = hop_s;
    const double predicted = Simulate(program, model, SimOptions{1}).makespan;
    row["hop_s"] = hop_s;
    row["predicted_no_comm_s"] = compute_only;
    row["predicted_s"] = predicted;
    row["error"] = measured / predicted - 1;
    row["error_no_comm"] = measured / compute_only - 1;
  }
  return row;
}

// A table line for a schedule that could not run: its name, then why.
std::string SkippedLine(const nlohmann::json& row) {
  const std::string name = row["schedule"];
  return name + std::string(18 - std::min<size_t>(name.size(), 17), ' ') +
         "skipped: " + row["skipped"].get<std::string>() + "\n";
}

std::string Table(const nlohmann::json& rows, bool overhead) {
  std::string text;
  char line[256];
  if (overhead) {
    std::snprintf(line, sizeof line, "%-17s %9s %12s %12s %12s %12s\n", "schedule", "actions",
                  "step ms", "us/action", "executor", "traced");
  } else {
    std::snprintf(line, sizeof line, "%-17s %12s %12s %8s %14s %8s\n", "schedule", "predicted s",
                  "measured s", "error", "no-comm pred.", "error");
  }
  text += line;
  for (const auto& row : rows) {
    const std::string name = row["schedule"];
    if (row.contains("skipped")) {
      text += SkippedLine(row);
      continue;
    }
    if (overhead) {
      std::snprintf(line, sizeof line, "%-17s %9d %12.3f %12.1f %12.1f %12.1f\n", name.c_str(),
                    row["actions_per_rank"].get<int>(), 1e3 * row["measured_s"].get<double>(),
                    row["us_per_action"].get<double>(), row["executor_us_per_action"].get<double>(),
                    row["traced_us_per_action"].get<double>());
    } else {
      std::snprintf(line, sizeof line, "%-17s %12.4f %12.4f %+7.1f%% %14.4f %+7.1f%%\n",
                    name.c_str(), row["predicted_s"].get<double>(), row["measured_s"].get<double>(),
                    100 * row["error"].get<double>(), row["predicted_no_comm_s"].get<double>(),
                    100 * row["error_no_comm"].get<double>());
    }
    text += line;
  }
  return text;
}

int RunBench(const BenchFlags& flags, const std::vector<std::string>& args) {
  CheckScheduleOptions(flags.pp, flags.microbatches, /*chunks=*/0);
  CheckInRange("--steps", flags.steps, 1, 10000);
  CheckInRange("--timeout", flags.timeout_s, 1, 7 * 24 * 3600);
  // Seconds a synthetic stage sleeps: a minute is already a very slow benchmark.
  CheckInRange("--f", flags.f, 0, 60);
  CheckInRange("--i", flags.i, 0, 60);
  CheckInRange("--w", flags.w, 0, 60);
  flags.launch.CheckLocalRanks(flags.pp, "--pp");
  const std::vector<std::string> names = Selected(flags.schedules);
  RanksOptions options;
  options.nproc = flags.pp;
  options.timeout = std::chrono::seconds(flags.timeout_s);
  return RunAsRanks(args, options, [&](Transport& transport) {
    CONVEYOR_CHECK(transport.world_size() == flags.pp)
        << "--pp " << flags.pp << " needs " << flags.pp << " ranks, the launcher started "
        << transport.world_size();
    // A micro-batch here is one sample of one token: the stages send one float.
    const double hop_s = flags.overhead ? 0 : MeasureHopLatency(transport, 4, 50);
    if (transport.rank() == 0 && !flags.overhead) {
      std::fprintf(stderr, "bench fidelity: one hop takes %.1f us here (median of 50)\n",
                   1e6 * hop_s);
    }
    nlohmann::json rows = nlohmann::json::array();
    for (const std::string& name : names) {
      rows.push_back(MeasureOne(transport, flags, name, false, hop_s));
    }
    if (flags.overhead) {
      // The same again with tracing on: spans, counters and the counting allocator.
      MemoryTracker::Install();
      for (auto& row : rows) {
        if (row.contains("skipped")) continue;
        const nlohmann::json traced = MeasureOne(transport, flags, row["schedule"], true, 0);
        row["traced_s"] = traced["measured_s"];
        row["traced_us_per_action"] = traced["us_per_action"];
      }
    }
    if (transport.rank() != 0) return;
    WriteOutput(flags.out,
                flags.format == "json" ? rows.dump(2) + "\n" : Table(rows, flags.overhead));
  });
}

void AddMode(CLI::App& bench, bool overhead, const std::vector<std::string>& args, int* exit_code) {
  auto flags = std::make_shared<BenchFlags>();
  flags->overhead = overhead;
  if (overhead) {
    flags->f = flags->i = flags->w = 0;
    flags->microbatches = 16;
    flags->steps = 20;
  }
  CLI::App* cmd = bench.add_subcommand(
      overhead ? "overhead" : "fidelity",
      overhead ? "executor cost per action with stages that take no time, tracing off and on"
               : "measured step time vs the simulator's, with stages that sleep F, I, W");
  cmd->add_option("--pp,-p", flags->pp, "pipeline ranks (processes)")->capture_default_str();
  cmd->add_option("--microbatches,-m", flags->microbatches, "micro-batches per step")
      ->capture_default_str();
  if (!overhead) {
    cmd->add_option("--f", flags->f, "seconds of one forward")->capture_default_str();
    cmd->add_option("--i", flags->i, "seconds of one backward-for-inputs")->capture_default_str();
    cmd->add_option("--w", flags->w, "seconds of one backward-for-weights")->capture_default_str();
  }
  cmd->add_option("--steps", flags->steps, "timed steps per schedule (median)")
      ->capture_default_str();
  cmd->add_option("--schedules", flags->schedules, "comma-separated names (default: all)");
  cmd->add_option("--format,-f", flags->format, "text or json")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  cmd->add_option("--out,-o", flags->out, "write to this file instead of stdout");
  cmd->add_option("--timeout", flags->timeout_s, "seconds any wait between ranks may take")
      ->capture_default_str();
  flags->launch.Register(cmd);
  cmd->callback([flags, args, exit_code] { *exit_code = RunBench(*flags, args); });
}

// `conveyor bench train`: the training configuration of the command line (a TOML file and
// train flags) run for a few steps under each schedule, then in one process.
struct BenchTrainFlags {
  TrainFlags train;
  std::string schedules;  // comma-separated; empty = all
  bool single = true;
  std::string format = "text";
  std::string out;
};

// Median seconds of the steps after the first, and the per-rank metrics.
nlohmann::json TrainRow(Trainer& trainer, const TrainTask& task, int steps) {
  std::vector<double> seconds;
  for (int k = 0; k < steps; ++k) {
    const double s = trainer.Step().seconds;
    if (k > 0 || steps == 1) seconds.push_back(s);
  }
  const double step_s = Median(seconds);
  return {{"step_s", step_s}, {"tokens_per_s", task.TokensPerBatch() / step_s}};
}

nlohmann::json BenchSchedule(Transport& transport, TrainConfig config, const std::string& name) {
  config.schedule = name;
  config.chunks = 0;
  try {
    PreflightCheck(config);
  } catch (const UserError& e) {
    return {{"schedule", name}, {"skipped", e.what()}};
  }
  const auto task = MakeTask(config);
  Trainer trainer(config, task, &transport);
  nlohmann::json row = TrainRow(trainer, *task, static_cast<int>(config.steps));
  const std::vector<RankMetrics> ranks = GatherRankMetrics(trainer);
  row["schedule"] = name;
  row["pp"] = config.pp;
  row["microbatches"] = config.microbatches;
  row["measured_bubble_fraction"] = MeasuredBubble(ranks, trainer.totals().pipeline_s());
  const SimResult predicted = PredictFromMeasuredCosts(trainer);
  row["predicted_bubble_fraction"] = predicted.bubble_fraction;
  // The step with its pipeline part as fast as the simulator says the schedule allows.
  double pipeline_s = 0;
  for (const RankMetrics& r : ranks) pipeline_s = std::max(pipeline_s, r.step_s);
  const double limit_s = row["step_s"].get<double>() - pipeline_s + predicted.makespan;
  row["predicted_tokens_per_s"] = task->TokensPerBatch() / limit_s;
  row["transfer_wait_fraction"] = ExposedCommFraction(ranks);
  double peak = 0, predicted_peak = 0;
  for (const RankMetrics& r : ranks) {
    peak = std::max(peak, r.peak_activation_bytes);
    predicted_peak = std::max(predicted_peak, r.predicted_peak_activation_bytes);
  }
  row["peak_activation_bytes"] = peak;
  row["predicted_peak_activation_bytes"] = predicted_peak;
  row["ranks"] = RankRowsJson(ranks);
  return row;
}

// The same model in this process alone (pp = 1), with as many intra-op threads as the
// pipeline's ranks have together.
nlohmann::json BenchSingleProcess(TrainConfig config, int threads) {
  config.pp = 1;
  config.schedule = "gpipe";
  config.chunks = 0;
  const int before = at::get_num_threads();
  at::set_num_threads(threads);
  const auto task = MakeTask(config);
  Trainer trainer(config, task, nullptr);
  nlohmann::json row = TrainRow(trainer, *task, static_cast<int>(config.steps));
  at::set_num_threads(before);
  row["schedule"] = "single process";
  row["pp"] = 1;
  row["threads"] = threads;
  return row;
}

std::string TrainTable(const nlohmann::json& rows) {
  double single = 0;
  for (const auto& row : rows) {
    if (row["schedule"] == "single process") single = row["tokens_per_s"].get<double>();
  }
  std::string text;
  char line[256];
  std::snprintf(line, sizeof line, "%-17s %9s %9s %9s %9s %9s %9s %8s %9s %9s\n", "schedule",
                "step ms", "tokens/s", "limit", "vs 1 proc", "bubble", "predicted", "exposed",
                "peak MiB", "predicted");
  text += line;
  for (const auto& row : rows) {
    const std::string name = row["schedule"];
    if (row.contains("skipped")) {
      text += SkippedLine(row);
      continue;
    }
    const double tokens = row["tokens_per_s"].get<double>();
    std::string ratio = single > 0 ? std::to_string(tokens / single).substr(0, 4) + "x" : "-";
    if (name == "single process") {
      std::snprintf(line, sizeof line, "%-17s %9.1f %9.0f %9s %9s   (%d threads)\n", name.c_str(),
                    1e3 * row["step_s"].get<double>(), tokens, "", ratio.c_str(),
                    row["threads"].get<int>());
    } else {
      std::snprintf(line, sizeof line,
                    "%-17s %9.1f %9.0f %9.0f %9s %8.1f%% %8.1f%% %7.1f%% %9.2f %9.2f\n",
                    name.c_str(), 1e3 * row["step_s"].get<double>(), tokens,
                    row["predicted_tokens_per_s"].get<double>(), ratio.c_str(),
                    100 * row["measured_bubble_fraction"].get<double>(),
                    100 * row["predicted_bubble_fraction"].get<double>(),
                    100 * row["transfer_wait_fraction"].get<double>(),
                    row["peak_activation_bytes"].get<double>() / (1 << 20),
                    row["predicted_peak_activation_bytes"].get<double>() / (1 << 20));
    }
    text += line;
  }
  return text;
}

void AddTrainMode(CLI::App& bench, const std::vector<std::string>& args, int* exit_code) {
  auto flags = std::make_shared<BenchTrainFlags>();
  CLI::App* cmd = bench.add_subcommand(
      "train", "a quick run of your training configuration under each schedule and in one process");
  RegisterTrainFlags(cmd, flags->train);
  cmd->add_option("--schedules", flags->schedules, "comma-separated names (default: all)");
  cmd->add_flag("!--no-single", flags->single, "skip the single-process run");
  cmd->add_option("--format,-f", flags->format, "text or json")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  cmd->add_option("--out,-o", flags->out, "write to this file instead of stdout");
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
    const std::vector<std::string> names = Selected(flags->schedules);
    flags->train.launch.CheckLocalRanks(config.pp, "--pp");
    PreflightFiles(config);
    RanksOptions options;
    options.nproc = config.pp;
    options.timeout = std::chrono::seconds(config.timeout_s);
    options.threads = config.threads;
    options.output = LaunchOptions::Output::kRank0Direct;  // progress on stderr, table on stdout
    *exit_code = RunAsRanks(args, options, [&](Transport& transport) {
      const bool leader = transport.rank() == 0;
      nlohmann::json rows = nlohmann::json::array();
      for (const std::string& name : names) {
        if (leader) std::fprintf(stderr, "bench train: %s\n", name.c_str());
        rows.push_back(BenchSchedule(transport, config, name));
      }
      if (flags->single) {
        // Rank 0 alone; the others wait for it.
        if (leader) {
          std::fprintf(stderr, "bench train: single process\n");
          rows.push_back(BenchSingleProcess(config, at::get_num_threads() * config.pp));
        }
        transport.Barrier();
      }
      if (!leader) return;
      WriteOutput(flags->out, flags->format == "json" ? rows.dump(2) + "\n" : TrainTable(rows));
    });
  });
}

}  // namespace

// `conveyor bench hop`: the one-way time of a message between neighbouring ranks, at the
// sizes of a tiny activation, of the default GPT's (32 KiB) and of a larger one's (256 KiB).
void AddHopMode(CLI::App& bench, const std::vector<std::string>& args, int* exit_code) {
  struct HopFlags {  // 64 bits: a value too large for an int is refused by name
    int64_t pp = 2;
    int64_t round_trips = 200;
    std::string format = "text";
    std::string out;
  };
  auto flags = std::make_shared<HopFlags>();
  CLI::App* cmd = bench.add_subcommand(
      "hop", "one-way time of a message between neighbouring ranks (4 B, 32 KiB, 256 KiB)");
  cmd->add_option("--pp,-p", flags->pp, "ranks (processes)")->capture_default_str();
  cmd->add_option("--round-trips", flags->round_trips, "ping-pongs per pair and size (median)")
      ->capture_default_str();
  cmd->add_option("--format,-f", flags->format, "text or json")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  cmd->add_option("--out,-o", flags->out, "write to this file instead of stdout");
  cmd->callback([flags, args, exit_code] {
    CheckInRange("--pp", flags->pp, 2, 64);
    CheckInRange("--round-trips", flags->round_trips, 1, 100000);
    RanksOptions options;
    options.nproc = static_cast<int>(flags->pp);
    *exit_code = RunAsRanks(args, options, [&](Transport& transport) {
      const char* shm = std::getenv("CONVEYOR_SHM");
      const std::string p2p = shm != nullptr && std::string(shm) == "0" ? "gloo" : "default";
      nlohmann::json rows = nlohmann::json::array();
      std::string text = "bytes        one hop us   (" + std::to_string(transport.world_size()) +
                         " ranks, point-to-point: " + p2p + ")\n";
      for (int64_t bytes : {int64_t{4}, int64_t{32} << 10, int64_t{256} << 10}) {
        const double hop_s =
            MeasureHopLatency(transport, bytes, static_cast<int>(flags->round_trips));
        rows.push_back({{"bytes", bytes},
                        {"ranks", transport.world_size()},
                        {"p2p", p2p},
                        {"hop_us", 1e6 * hop_s}});
        char line[64];
        std::snprintf(line, sizeof line, "%-12lld %10.1f\n", static_cast<long long>(bytes),
                      1e6 * hop_s);
        text += line;
      }
      if (transport.rank() == 0) {
        WriteOutput(flags->out, flags->format == "json" ? rows.dump(2) + "\n" : text);
      }
    });
  });
}

void AddBenchCommand(CLI::App& app, const std::vector<std::string>& args, int* exit_code) {
  CLI::App* bench = app.add_subcommand("bench", "measure the runtime (processes over Gloo)");
  bench->require_subcommand(1);
  AddMode(*bench, /*overhead=*/false, args, exit_code);
  AddMode(*bench, /*overhead=*/true, args, exit_code);
  AddTrainMode(*bench, args, exit_code);
  AddHopMode(*bench, args, exit_code);
}

}  // namespace conveyor::cli
