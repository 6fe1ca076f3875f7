#include "conveyor/cli/tensorboard_log.h"

#include <algorithm>

namespace conveyor {
namespace {

constexpr double kMiB = 1 << 20;

}  // namespace

std::vector<TaggedScalar> StepScalars(const StepMetrics& m, bool loss_scaling) {
  std::vector<TaggedScalar> scalars;
  if (m.skipped) {
    scalars.emplace_back("train/skipped", 1);
    if (loss_scaling) scalars.emplace_back("train/loss_scale", m.loss_scale);
    return scalars;
  }
  scalars = {{"train/loss", m.loss},           {"train/lr", m.lr},
             {"train/grad_norm", m.grad_norm}, {"train/tokens_per_s", m.tokens_per_s},
             {"train/step_s", m.seconds},      {"train/data_s", m.data_s}};
  if (loss_scaling) scalars.emplace_back("train/loss_scale", m.loss_scale);
  for (const auto& [name, value] : m.auxiliary_losses) {
    scalars.emplace_back("train/aux/" + name, value);
  }
  if (m.dp.buckets > 0) {
    scalars.emplace_back("dp/comm_s", m.dp.comm_s);
    scalars.emplace_back("dp/exposed_s", m.dp.exposed_s);
  }
  double worst = 0;
  for (const auto& [block, load] : m.expert_load) {
    const double max = ExpertLoadMax(load), mean = ExpertLoadMean(load);
    const double imbalance = mean > 0 ? max / mean : 1;
    worst = std::max(worst, imbalance);
    scalars.emplace_back("moe/" + block + "/load_max", max);
    scalars.emplace_back("moe/" + block + "/load_mean", mean);
    scalars.emplace_back("moe/" + block + "/imbalance", imbalance);
    const auto dropped = m.tokens_dropped.find(block);
    if (dropped != m.tokens_dropped.end()) {
      scalars.emplace_back("moe/" + block + "/tokens_dropped", dropped->second);
    }
  }
  if (!m.expert_load.empty()) scalars.emplace_back("moe/imbalance_max", worst);
  return scalars;
}

std::vector<TaggedScalar> EvalScalars(const EvalMetrics& e) {
  std::vector<TaggedScalar> scalars;
  if (e.batches > 0) scalars.emplace_back("eval/loss", e.loss);
  if (e.accuracy >= 0) scalars.emplace_back("eval/accuracy", e.accuracy);
  return scalars;
}

std::vector<TaggedScalar> RunScalars(const TrainingRun& run) {
  std::vector<TaggedScalar> scalars = {{"pipeline/bubble_measured", run.measured_bubble},
                                       {"pipeline/bubble_predicted", run.predicted_bubble},
                                       {"pipeline/step_s_measured", run.measured_pipeline_s},
                                       {"pipeline/step_s_predicted", run.predicted_pipeline_s},
                                       {"pipeline/transfer_wait_fraction", run.exposed_comm}};
  double peak_tensor = 0, peak_resident = 0;
  for (const RankReport& r : run.ranks) {
    peak_tensor = std::max(peak_tensor, r.peak_tensor_bytes);
    peak_resident = std::max(peak_resident, r.peak_resident_bytes);
  }
  if (!run.ranks.empty()) {
    scalars.emplace_back("memory/peak_tensor_mib_max", peak_tensor / kMiB);
    scalars.emplace_back("memory/peak_resident_mib_max", peak_resident / kMiB);
  }
  for (const RankReport& r : run.ranks) {
    scalars.emplace_back("memory/rank_" + std::to_string(r.rank) + "/peak_tensor_mib",
                         r.peak_tensor_bytes / kMiB);
  }
  if (run.dp.buckets > 0) scalars.emplace_back("dp/hidden_fraction", run.dp.hidden_fraction());
  return scalars;
}

TensorBoardLog::TensorBoardLog(const std::string& dir, TrainingObserver& next) : next_(next) {
  if (!dir.empty()) writer_ = std::make_unique<EventFileWriter>(dir);
}

void TensorBoardLog::Started(Trainer& trainer) {
  loss_scaling_ = trainer.loss_scaler().enabled();
  next_.Started(trainer);
}

void TensorBoardLog::Stepped(const StepMetrics& step, Trainer& trainer) {
  if (writer_) writer_->Write(step.step, StepScalars(step, loss_scaling_));
  next_.Stepped(step, trainer);
}

void TensorBoardLog::Evaluated(const EvalMetrics& eval, const TrainTask& task) {
  if (writer_) writer_->Write(eval.step, EvalScalars(eval));
  next_.Evaluated(eval, task);
}

void TensorBoardLog::Checkpointed(const std::string& where) { next_.Checkpointed(where); }

void TensorBoardLog::Measured(const Trainer& trainer, const SimResult& predicted) {
  next_.Measured(trainer, predicted);
}

void TensorBoardLog::Finished(const TrainingRun& run) {
  if (writer_) writer_->Write(run.steps, RunScalars(run));
}

}  // namespace conveyor
