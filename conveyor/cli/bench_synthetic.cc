#include "conveyor/cli/bench_synthetic.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <memory>

#include "conveyor/cli/run_as_ranks.h"
#include "conveyor/common/error.h"
#include "conveyor/common/range_check.h"
#include "conveyor/profile/step_recorder.h"
#include "conveyor/runtime/pipeline_rank.h"
#include "conveyor/runtime/synthetic_stage.h"
#include "conveyor/schedule/lower.h"
#include "conveyor/schedule/pipeline_limits.h"
#include "conveyor/schedule/registry.h"

namespace conveyor {
namespace {

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
    const at::Tensor all = at::stack(transport.AllGather(at::tensor(  // (ranks, 2)
        std::vector<double>{elapsed, stats.seconds - stats.compute_s - stats.comm_wait_s},
        at::kDouble)));
    times.slowest.push_back(all.select(1, 0).max().item<double>());
    times.executor.push_back(all.select(1, 1).max().item<double>());
  }
  return times;
}

}  // namespace

void RegisterSyntheticBenchFlags(CLI::App* cmd, SyntheticBenchFlags& flags, bool stage_costs) {
  cmd->add_option("--pp,-p", flags.pp, "pipeline ranks (processes)")->capture_default_str();
  cmd->add_option("--microbatches,-m", flags.microbatches, "micro-batches per step")
      ->capture_default_str();
  if (stage_costs) {
    cmd->add_option("--f", flags.f, "seconds of one forward")->capture_default_str();
    cmd->add_option("--i", flags.i, "seconds of one backward-for-inputs")->capture_default_str();
    cmd->add_option("--w", flags.w, "seconds of one backward-for-weights")->capture_default_str();
  }
  cmd->add_option("--steps", flags.steps, "timed steps per schedule (median)")
      ->capture_default_str();
  cmd->add_option("--schedules", flags.schedules, "comma-separated names (default: all)");
  flags.output.Register(cmd);
  cmd->add_option("--timeout", flags.timeout_s, "seconds any wait between ranks may take")
      ->capture_default_str();
  flags.launch.Register(cmd);
}

SyntheticMeasurement MeasureSynthetic(Transport& transport, const SyntheticBenchFlags& flags,
                                      const std::string& name, bool traced) {
  SyntheticMeasurement m;
  try {
    const ScheduleOptions options =
        CheckScheduleOptions(flags.pp, flags.microbatches, /*chunks=*/0);
    CheckPipelineSize(name, options);
    m.program = BuildSchedule(name, options);
  } catch (const UserError& e) {
    m.row = {{"schedule", name}, {"skipped", e.what()}};
    return m;
  }
  const Program lowered = Lower(m.program);
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
  m.measured_s = Median(times.slowest);
  m.executor_s = Median(times.executor);
  size_t most_actions = 0;
  for (const auto& actions : lowered.ranks) most_actions = std::max(most_actions, actions.size());
  m.actions_per_rank = static_cast<int64_t>(most_actions);
  m.row = {{"schedule", name},
           {"pp", flags.pp},
           {"microbatches", flags.microbatches},
           {"measured_s", m.measured_s},
           {"actions_per_rank", most_actions}};
  return m;
}

int RunSyntheticBench(
    const SyntheticBenchFlags& flags, const std::vector<std::string>& args,
    const std::function<nlohmann::json(Transport&, const std::vector<std::string>&)>& measure,
    const std::function<std::string(const nlohmann::json&)>& table) {
  CheckScheduleOptions(flags.pp, flags.microbatches, /*chunks=*/0);
  CheckInRange("--steps", flags.steps, 1, 10000);
  CheckInRange("--timeout", flags.timeout_s, 1, 7 * 24 * 3600);
  // Seconds a synthetic stage sleeps: a minute is already a very slow benchmark.
  CheckInRange("--f", flags.f, 0, 60);
  CheckInRange("--i", flags.i, 0, 60);
  CheckInRange("--w", flags.w, 0, 60);
  flags.launch.CheckLocalRanks(flags.pp, "--pp");
  const std::vector<std::string> names = SelectedSchedules(flags.schedules);
  RanksOptions options;
  options.nproc = flags.pp;
  options.timeout = std::chrono::seconds(flags.timeout_s);
  return RunAsRanks(args, options, [&](const RankContext& rank) {
    Transport& transport = *rank.world;
    CONVEYOR_CHECK(transport.world_size() == flags.pp)
        << "--pp " << flags.pp << " needs " << flags.pp << " ranks, the launcher started "
        << transport.world_size();
    const nlohmann::json rows = measure(transport, names);
    if (transport.rank() == 0) flags.output.Write(rows, table);
  });
}

}  // namespace conveyor
