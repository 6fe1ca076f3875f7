#include "conveyor/cli/train_command.h"

#include <unistd.h>

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>

#include "conveyor/cli/auto_train.h"
#include "conveyor/cli/metrics_json.h"
#include "conveyor/cli/output.h"
#include "conveyor/cli/progress_bar.h"
#include "conveyor/cli/run_as_ranks.h"
#include "conveyor/cli/tensorboard_log.h"
#include "conveyor/cli/trace_gather.h"
#include "conveyor/cli/train_flags.h"
#include "conveyor/cli/train_summary.h"
#include "conveyor/launch/launcher.h"
#include "conveyor/optim/adamw_kernel.h"
#include "conveyor/train/preflight.h"
#include "conveyor/train/training_run.h"

namespace conveyor {
namespace {

// A loss scale as the progress lines show it: "65536".
std::string FormatScale(double scale) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", scale);
  return text;
}

// A step's row of the --metrics file; `loss_scaling`: with its loss scale.
nlohmann::json StepJson(const StepMetrics& m, bool loss_scaling) {
  nlohmann::json row;
  if (m.skipped) {
    // JSON has no NaN: the row says which step was skipped, its loss null.
    row = {{"step", m.step}, {"skipped", true}, {"loss", nullptr}};
    if (m.overflow) row["overflow"] = true;
  } else {
    row = {{"step", m.step},           {"loss", m.loss},       {"lr", m.lr},
           {"grad_norm", m.grad_norm}, {"seconds", m.seconds}, {"tokens_per_s", m.tokens_per_s},
           {"data_s", m.data_s}};
    if (!m.auxiliary_losses.empty()) row["auxiliary_losses"] = m.auxiliary_losses;
    for (const auto& [block, load] : m.expert_load) {
      row["expert_load"][block] = {{"max", ExpertLoadMax(load)}, {"mean", ExpertLoadMean(load)}};
    }
    if (!m.tokens_dropped.empty()) row["tokens_dropped"] = m.tokens_dropped;
    if (m.dp.buckets > 0) {
      row["dp_comm_s"] = m.dp.comm_s;
      row["dp_exposed_s"] = m.dp.exposed_s;
    }
  }
  if (loss_scaling) row["loss_scale"] = m.loss_scale;
  return row;
}

// The --metrics file: every step's and evaluation's row, then the summary's numbers.
nlohmann::json MetricsJson(const TrainConfig& config, const TrainingRun& s) {
  nlohmann::json steps = nlohmann::json::array(), evals = nlohmann::json::array();
  for (const StepMetrics& m : s.step_metrics) steps.push_back(StepJson(m, s.loss_scale > 0));
  for (const EvalMetrics& e : s.evals) {
    nlohmann::json row = {{"step", e.step}, {"loss", e.loss}, {"batches", e.batches}};
    if (e.accuracy >= 0) row["accuracy"] = e.accuracy;
    evals.push_back(row);
  }
  nlohmann::json metrics = {{"steps", std::move(steps)},
                            {"evals", std::move(evals)},
                            {"final_loss", s.final_loss},
                            {"final_eval_loss", s.final_eval.loss},
                            {"schedule", config.schedule},
                            {"pp", config.pp},
                            {"dp", s.replicas},
                            {"tp", config.tp},
                            {"microbatches", config.microbatches},
                            {"dtype", ComputeDtypeName(config.dtype)},
                            {"adamw_kernel", s.adamw_kernel},
                            {"cache_weight_casts", config.cache_weight_casts},
                            {"model", ModelKindName(config.model.kind)},
                            {"skipped_steps", s.skipped_steps},
                            {"trained_parameters", s.trained_parameters},
                            {"frozen_parameters", s.frozen_parameters},
                            {"frozen_state_bytes_saved", s.frozen_state_bytes}};
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
  metrics["pipeline_s"] = s.measured_pipeline_s;
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

// Rank 0's progress lines (the others' bar stays silent): the run's set-up, each step, the
// evaluations, checkpoints and skipped steps; traces written where --trace asks.
class ProgressLines : public TrainingObserver {
 public:
  ProgressLines(const TrainConfig& config, const RankContext& rank)
      : config_(config), rank_(rank), leader_(rank.rank == 0) {}

  void Started(Trainer& trainer) override {
    progress_.emplace(config_.steps, trainer.step(), leader_ && isatty(STDOUT_FILENO));
    if (!leader_) return;
    std::string parts;
    for (const LayerRange& r : trainer.model().partition()) {
      parts += (parts.empty() ? "" : " | ") + std::to_string(r.size());
    }
    progress_->Note(trainer.task().Describe());
    progress_->Note("pipeline: " + config_.schedule + ", " +
                    trainer.model().program().layout.Describe() + "; layers per stage " + parts +
                    (config_.stage_layers.empty()
                         ? " (by " + std::string(PartitionByName(config_.partition)) + ")"
                         : " (as --stage-layers)"));
    progress_->Note(
        "device: " + trainer.model().device().str() +
        (trainer.model().device().is_cuda() ? " (each rank on its local rank's GPU)" : "") +
        (config_.dtype == ComputeDtype::kFp32
             ? "; fp32"
             : "; " + std::string(ComputeDtypeName(config_.dtype)) +
                   " matrix products, fp32 weights, gradients and reductions") +
        (trainer.loss_scaler().enabled()
             ? "; dynamic loss scale from " + FormatScale(trainer.loss_scaler().scale())
             : "") +
        (config_.cache_weight_casts ? "; each weight cast once an update (cached)" : "") +
        "; AdamW " + std::string(AdamWKernelName(trainer.adamw_kernel())) + " kernels");
    if (!rank_.threads.empty()) progress_->Note("threads: " + rank_.threads);
    const std::string mesh = MeshDescription(trainer);
    if (!mesh.empty()) progress_->Note("mesh: " + mesh);
    if (trainer.step() > 0) progress_->Note("resumed at step " + std::to_string(trainer.step()));
  }

  void Stepped(const StepMetrics& m, Trainer& trainer) override {
    if (!leader_) return;
    if (!m.skipped) {
      progress_->Step(m.step, m.loss, m.lr, m.tokens_per_s);
      return;
    }
    progress_->Note("step " + std::to_string(m.step) + " skipped: " +
                    (m.overflow
                         ? "gradients overflowed at loss scale " + FormatScale(m.loss_scale) +
                               ", now " + FormatScale(trainer.loss_scaler().scale())
                         : "loss " + std::to_string(m.loss) + ", gradient norm " +
                               std::to_string(m.grad_norm)));
  }

  void Evaluated(const EvalMetrics& e, const TrainTask& task) override {
    if (!leader_) return;
    std::string line = "eval at step " + std::to_string(e.step) + ": " +
                       (e.batches > 0 ? "loss " + std::to_string(e.loss) : "no held-out data");
    if (e.accuracy >= 0) {
      line += ", accuracy " + Percent(e.accuracy) + " (majority class " +
              Percent(task.BaselineAccuracy()) + ")";
    }
    progress_->Note(line);
  }

  void Checkpointed(const std::string& where) override {
    if (leader_) progress_->Note("checkpoint " + where);
  }

  void Measured(const Trainer& trainer, const SimResult& predicted) override {
    if (!config_.trace.empty() && trainer.model().leads_replicas()) {  // one pipeline's traces
      WriteTraces(config_.trace, trainer.LastTimeline(), predicted.timeline,
                  *trainer.model().pipeline_group());
    }
  }

  // Ends the bar, on every rank that started one.
  void Finish() {
    if (progress_) progress_->Finish();
  }

 private:
  const TrainConfig& config_;
  const RankContext& rank_;
  const bool leader_;
  std::optional<ProgressBar> progress_;  // from Started on
};

// `ranks_in_process`: the ranks sharing this process's allocator (rank threads). Rank 0
// alone writes the --tensorboard file.
void TrainRank(const TrainConfig& config, const RankContext& rank, int ranks_in_process) {
  ProgressLines progress(config, rank);
  TensorBoardLog tensorboard(rank.rank == 0 ? config.tensorboard : "", progress);
  const TrainingRun run = RunTraining(config, rank, ranks_in_process, tensorboard);
  progress.Finish();
  if (rank.rank != 0) return;
  tensorboard.Finished(run);
  if (!config.metrics.empty()) WriteOutput(config.metrics, MetricsJson(config, run).dump(2) + "\n");
  PrintTrainSummary(run);
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
