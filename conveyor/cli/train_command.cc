#include "conveyor/cli/train_command.h"

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <utility>

#include "conveyor/cli/auto_train.h"
#include "conveyor/cli/metrics_json.h"
#include "conveyor/cli/output.h"
#include "conveyor/cli/progress_bar.h"
#include "conveyor/cli/run_as_ranks.h"
#include "conveyor/cli/trace_gather.h"
#include "conveyor/cli/train_flags.h"
#include "conveyor/cli/train_summary.h"
#include "conveyor/common/text.h"
#include "conveyor/data/byte_tokenizer.h"
#include "conveyor/data/load_tokenizer.h"
#include "conveyor/data/tokenizer.h"
#include "conveyor/device/device_memory.h"
#include "conveyor/launch/launcher.h"
#include "conveyor/profile/memory_tracker.h"
#include "conveyor/train/builtin_tasks.h"
#include "conveyor/train/checkpoint.h"
#include "conveyor/train/evaluate.h"
#include "conveyor/train/forward_pipeline.h"
#include "conveyor/train/generate.h"
#include "conveyor/train/measured_costs.h"
#include "conveyor/train/preflight.h"
#include "conveyor/train/rank_report.h"
#include "conveyor/train/trainer.h"

namespace conveyor {
namespace {

// A loss scale as the progress lines show it: "65536".
std::string FormatScale(double scale) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", scale);
  return text;
}

// The --metrics file: every step's and evaluation's row, then the summary's numbers.
nlohmann::json MetricsJson(const TrainConfig& config, const TrainSummary& s, double pipeline_s,
                           nlohmann::json steps, nlohmann::json evals) {
  nlohmann::json metrics = {{"steps", std::move(steps)},
                            {"evals", std::move(evals)},
                            {"final_loss", s.final_loss},
                            {"final_eval_loss", s.final_eval.loss},
                            {"schedule", config.schedule},
                            {"pp", config.pp},
                            {"dp", config.dp},
                            {"tp", config.tp},
                            {"microbatches", config.microbatches},
                            {"model", ModelKindName(config.model)},
                            {"skipped_steps", s.skipped_steps}};
  if (s.loss_scale > 0) {
    metrics["overflow_steps"] = s.overflow_steps;
    metrics["final_loss_scale"] = s.loss_scale;
  }
  metrics["ranks"] = RankRowsJson(s.ranks);
  metrics["measured_bubble_fraction"] = s.measured_bubble;
  metrics["predicted_bubble_fraction"] = s.predicted_bubble;
  metrics["measured_pipeline_s"] = s.measured_pipeline_s;
  metrics["predicted_pipeline_s"] = s.predicted_pipeline_s;
  metrics["hop_s"] = s.hop_s;
  metrics["pipeline_s"] = pipeline_s;
  metrics["transfer_wait_fraction"] = s.exposed_comm;
  if (s.dp.buckets > 0) {
    metrics["dp_comm_s"] = s.dp.comm_s;
    metrics["dp_hidden_fraction"] = s.dp.hidden_fraction();
  }
  if (s.final_eval.accuracy >= 0) {
    metrics["final_accuracy"] = s.final_eval.accuracy;
    metrics["baseline_accuracy"] = s.baseline_accuracy;
  }
  if (!s.sample.empty()) metrics["sample"] = s.sample;
  return metrics;
}

// "--memory-per-rank 64.0 MiB at step 3"; step 0: "... before the first step" (the weights,
// a checkpoint's state: what a rank builds before it runs).
std::string MemoryLimitName(int64_t bytes, int64_t step) {
  const std::string when =
      step > 0 ? "at step " + std::to_string(step) : std::string("before the first step");
  return Printf("--memory-per-rank %.1f MiB %s", static_cast<double>(bytes) / (1 << 20),
                when.c_str());
}

// `ranks_in_process`: the ranks sharing this process's allocator (rank threads), whose
// memory limits add up.
void TrainRank(const TrainConfig& config, const RankContext& rank, int ranks_in_process) {
  const bool leader = rank.rank == 0;
  const int64_t limit = config.memory_per_rank * ranks_in_process;
  if (!rank.device.is_cuda()) {
    MemoryTracker::Install();  // before the model: its weights count
    if (limit > 0) MemoryTracker::SetLimit(limit, MemoryLimitName(config.memory_per_rank, 0));
  }
  auto task = MakeTask(config);
  Trainer trainer(config, task, rank);
  if (!config.resume.empty()) LoadCheckpoint(config.resume, trainer, config);
  ForwardPipeline forward(trainer.model());
  ProgressBar progress(config.steps, trainer.step(), leader && isatty(STDOUT_FILENO));
  std::string summary_mesh;
  if (leader) {
    std::string parts;
    for (const LayerRange& r : trainer.model().partition()) {
      parts += (parts.empty() ? "" : " | ") + std::to_string(r.size());
    }
    progress.Note(task->Describe());
    progress.Note("pipeline: " + config.schedule + ", " +
                  trainer.model().program().layout.Describe() + "; layers per stage " + parts +
                  (config.stage_layers.empty()
                       ? " (by " + std::string(PartitionByName(config.partition)) + ")"
                       : " (as --stage-layers)"));
    progress.Note(
        "device: " + trainer.model().device().str() +
        (trainer.model().device().is_cuda() ? " (each rank on its local rank's GPU)" : "") +
        (config.dtype == ComputeDtype::kFp32
             ? "; fp32"
             : "; " + std::string(ComputeDtypeName(config.dtype)) +
                   " matrix products, fp32 weights, gradients and reductions") +
        (trainer.loss_scaler().enabled()
             ? "; dynamic loss scale from " + FormatScale(trainer.loss_scaler().scale())
             : ""));
    if (!rank.threads.empty()) progress.Note("threads: " + rank.threads);
    if (trainer.model().mesh().dp() > 1 || trainer.model().mesh().tp() > 1) {
      summary_mesh = trainer.model().mesh().Describe();
      progress.Note("mesh: " + summary_mesh);
    }
    if (trainer.step() > 0) progress.Note("resumed at step " + std::to_string(trainer.step()));
  }
  nlohmann::json steps = nlohmann::json::array(), evals = nlohmann::json::array();
  auto evaluate = [&] {
    const EvalMetrics e = Evaluate(forward, trainer.task(), trainer.step());
    nlohmann::json row = {{"step", e.step}, {"loss", e.loss}, {"batches", e.batches}};
    std::string line = "eval at step " + std::to_string(e.step) + ": " +
                       (e.batches > 0 ? "loss " + std::to_string(e.loss) : "no held-out data");
    if (e.accuracy >= 0) {
      row["accuracy"] = e.accuracy;
      line += ", accuracy " + Percent(e.accuracy) + " (majority class " +
              Percent(task->BaselineAccuracy()) + ")";
    }
    evals.push_back(row);
    if (leader) progress.Note(line);
    return e;
  };
  TrainSummary summary;
  const int64_t first_step = trainer.step();  // after a resume, not 0
  while (trainer.step() < config.steps) {
    if (limit > 0 && MemoryTracker::installed()) {
      MemoryTracker::SetLimit(limit, MemoryLimitName(config.memory_per_rank, trainer.step() + 1));
    }
    const StepMetrics m = trainer.Step();
    if (limit > 0 && rank.device.is_cuda()) {
      const DeviceMemory memory = ReadDeviceMemory(rank.device);
      CONVEYOR_CHECK(memory.peak_allocated_bytes <= limit)
          << "rank " << rank.rank << ", step " << m.step << ": the GPU's tensors peaked at "
          << memory.peak_allocated_bytes << " bytes, over "
          << MemoryLimitName(config.memory_per_rank, m.step) << " (" << limit << " bytes)";
    }
    summary.tokens_per_s = m.tokens_per_s;
    nlohmann::json row = {{"step", m.step},       {"loss", m.loss},
                          {"lr", m.lr},           {"grad_norm", m.grad_norm},
                          {"seconds", m.seconds}, {"tokens_per_s", m.tokens_per_s},
                          {"data_s", m.data_s}};
    if (!m.auxiliary_losses.empty()) row["auxiliary_losses"] = m.auxiliary_losses;
    if (m.step == first_step + 1) summary.first_data_s = m.data_s;
    summary.data_s += m.data_s / static_cast<double>(config.steps - first_step);
    if (m.dp.buckets > 0) {
      row["dp_comm_s"] = m.dp.comm_s;
      row["dp_exposed_s"] = m.dp.exposed_s;
      summary.dp.comm_s += m.dp.comm_s;
      summary.dp.exposed_s += m.dp.exposed_s;
      summary.dp.bytes += m.dp.bytes;
      summary.dp.scattered_bytes += m.dp.scattered_bytes;
      summary.dp.scattered_kept_bytes += m.dp.scattered_kept_bytes;
      summary.dp.buckets += m.dp.buckets;
    }
    if (m.skipped) {
      // JSON has no NaN: the row says which step was skipped, its loss null.
      row = {{"step", m.step}, {"skipped", true}, {"loss", nullptr}};
      ++summary.skipped_steps;
      if (m.overflow) {
        row["overflow"] = true;
        ++summary.overflow_steps;
      }
      if (leader) {
        progress.Note("step " + std::to_string(m.step) + " skipped: " +
                      (m.overflow
                           ? "gradients overflowed at loss scale " + FormatScale(m.loss_scale) +
                                 ", now " + FormatScale(trainer.loss_scaler().scale())
                           : "loss " + std::to_string(m.loss) + ", gradient norm " +
                                 std::to_string(m.grad_norm)));
      }
    } else {
      summary.final_loss = m.loss;
      summary.auxiliary_losses = m.auxiliary_losses;
      if (leader) progress.Step(m.step, m.loss, m.lr, m.tokens_per_s);
    }
    if (trainer.loss_scaler().enabled()) row["loss_scale"] = m.loss_scale;
    steps.push_back(row);
    const bool last = m.step == config.steps;
    if (config.eval_every > 0 && m.step % config.eval_every == 0 && !last) evaluate();
    if (!config.checkpoint_dir.empty() && !last && config.checkpoint_every > 0 &&
        m.step % config.checkpoint_every == 0) {
      const std::string where = SaveCheckpoint(config.checkpoint_dir, trainer, config, rank.world);
      if (leader) progress.Note("checkpoint " + where);
    }
  }
  summary.final_eval = evaluate();
  summary.ranks = trainer.RankReports();
  const SimResult predicted = PredictFromMeasuredCosts(trainer);
  if (!config.trace.empty() && trainer.model().leads_replicas()) {  // one pipeline's traces
    WriteTraces(config.trace, trainer.LastTimeline(), predicted.timeline,
                *trainer.model().pipeline_group());
  }
  if (!config.checkpoint_dir.empty()) {
    const std::string where = SaveCheckpoint(config.checkpoint_dir, trainer, config, rank.world);
    if (leader) progress.Note("checkpoint " + where);
  }
  // Text needs the model's tokenizer: bytes only for a model of 256 ids.
  const std::unique_ptr<Tokenizer> tokenizer = LoadTokenizer(config.tokenizer);
  if (IsLanguageModel(config.model) && config.sample_tokens > 0 &&
      (dynamic_cast<const ByteTokenizer*>(tokenizer.get()) == nullptr ||
       ModelVocab(config) == static_cast<int>(ByteTokenizer::kVocabSize))) {
    summary.sample =
        ByteTokenizer::Printable(Generate(forward, *tokenizer, "", config.sample_tokens,
                                          kDefaultTemperature, config.seed, config.seq_len));
  }
  progress.Finish();
  if (!leader) return;
  summary.steps = trainer.step();
  summary.baseline_accuracy = task->BaselineAccuracy();
  const int pp = trainer.model().program().layout.num_ranks();
  summary.measured_bubble = MeasuredBubble(summary.ranks, trainer.measurements().pipeline_s(),
                                           trainer.sharing().Room(pp) / pp);
  summary.predicted_bubble = predicted.bubble_fraction;
  summary.measured_pipeline_s = trainer.measurements().pipeline_s();
  summary.predicted_pipeline_s = predicted.makespan;
  summary.sharing = trainer.sharing().Describe();
  summary.hop_s = trainer.hop_s();
  summary.exposed_comm = ExposedCommFraction(summary.ranks);
  summary.trace_dir = config.trace;
  summary.mesh = summary_mesh;
  summary.optimizer_state_bytes = trainer.optimizer_state_bytes();
  if (trainer.loss_scaler().enabled()) summary.loss_scale = trainer.loss_scaler().scale();
  if (!config.metrics.empty()) {
    TrainConfig resolved = config;
    resolved.dp = trainer.model().mesh().dp();  // also when the world decided it (dp 0)
    const nlohmann::json metrics = MetricsJson(
        resolved, summary, trainer.measurements().pipeline_s(), std::move(steps), std::move(evals));
    WriteOutput(config.metrics, metrics.dump(2) + "\n");
  }
  PrintTrainSummary(summary);
}

}  // namespace

void AddTrainCommand(CLI::App& app, const std::vector<std::string>& args, int* exit_code) {
  auto flags = std::make_shared<TrainFlags>();
  auto auto_flags = std::make_shared<AutoTrainFlags>();
  CLI::App* cmd = app.add_subcommand("train", "train a model across pipeline ranks");
  RegisterTrainFlags(cmd, *flags);
  auto_flags->Register(cmd);
  cmd->callback([flags, auto_flags, args, exit_code] {
    flags->auto_layout = auto_flags->on;
    TrainConfig config = ResolveTrainConfig(*flags);
    std::vector<std::string> rank_args = args;
    if (auto_flags->on) {
      flags->launch.CheckLocalRanks(auto_flags->world, "--world");  // before it profiles them
      config = ChooseTrainLayout(config, *auto_flags, flags->launch.rank_threads);
      rank_args = ArgsWithLayout(args, config);
    }
    const RanksOptions options = MeshRanksOptions(config, flags->launch);  // process count first
    // The launching process checks the run (and loads the corpus to do so) once; the ranks it
    // starts parse the same command line but skip the checks. Under torchrun or Slurm every
    // rank checks.
    if (!LaunchedByConveyor()) {
      PreflightCheck(config);
      PreflightFiles(config);
    }
    *exit_code = RunAsRanks(rank_args, options, [&](const RankContext& rank) {
      TrainRank(config, rank, options.as_threads ? options.nproc : 1);
    });
  });
}

}  // namespace conveyor
