#include "conveyor/train/training_run.h"

#include <memory>
#include <string>
#include <utility>

#include "conveyor/common/error.h"
#include "conveyor/common/text.h"
#include "conveyor/data/byte_tokenizer.h"
#include "conveyor/data/load_tokenizer.h"
#include "conveyor/data/tokenizer.h"
#include "conveyor/device/device_memory.h"
#include "conveyor/mesh/mesh.h"
#include "conveyor/nn/lora.h"
#include "conveyor/profile/memory_tracker.h"
#include "conveyor/train/builtin_tasks.h"
#include "conveyor/train/checkpoint.h"
#include "conveyor/train/forward_pipeline.h"
#include "conveyor/train/generate.h"
#include "conveyor/train/measured_costs.h"
#include "conveyor/train/model_registry.h"

namespace conveyor {
namespace {

// "--memory-per-rank 64.0 MiB at step 3"; step 0: "... before the first step" (the weights,
// a checkpoint's state: what a rank builds before it runs).
std::string MemoryLimitName(int64_t bytes, int64_t step) {
  const std::string when =
      step > 0 ? "at step " + std::to_string(step) : std::string("before the first step");
  return Printf("--memory-per-rank %.1f MiB %s", static_cast<double>(bytes) / (1 << 20),
                when.c_str());
}

// Adds step `m` (the `first_step` the run started after, of `config.steps`) to `run`.
void Count(const StepMetrics& m, int64_t first_step, const TrainConfig& config, TrainingRun& run) {
  run.tokens_per_s = m.tokens_per_s;
  if (m.step == first_step + 1) run.first_data_s = m.data_s;
  run.data_s += m.data_s / static_cast<double>(config.steps - first_step);
  if (m.dp.buckets > 0) {
    run.dp.comm_s += m.dp.comm_s;
    run.dp.exposed_s += m.dp.exposed_s;
    run.dp.bytes += m.dp.bytes;
    run.dp.scattered_bytes += m.dp.scattered_bytes;
    run.dp.scattered_kept_bytes += m.dp.scattered_kept_bytes;
    run.dp.buckets += m.dp.buckets;
  }
  if (m.skipped) {
    ++run.skipped_steps;
    if (m.overflow) ++run.overflow_steps;
  } else {
    run.final_loss = m.loss;
    run.auxiliary_losses = m.auxiliary_losses;
    run.expert_load = m.expert_load;
  }
  run.step_metrics.push_back(m);
}

// Text from the model when it is a language model and config.sample_tokens asks for it;
// empty otherwise. Text needs the model's tokenizer: bytes only for a model of 256 ids.
std::string Sample(ForwardPipeline& forward, const TrainConfig& config) {
  const std::unique_ptr<Tokenizer> tokenizer = LoadTokenizer(config.tokenizer);
  if (!IsLanguageModel(config.model.kind) || config.sample_tokens <= 0 ||
      (dynamic_cast<const ByteTokenizer*>(tokenizer.get()) != nullptr &&
       ModelSizes(config.model).vocab != static_cast<int>(ByteTokenizer::kVocabSize))) {
    return "";
  }
  return ByteTokenizer::Printable(Generate(forward, *tokenizer, "", config.sample_tokens,
                                           kDefaultTemperature, config.seed, config.model.seq_len));
}

}  // namespace

std::string MeshDescription(const Trainer& trainer) {
  const Mesh& mesh = trainer.model().mesh();
  return mesh.dp() > 1 || mesh.tp() > 1 ? mesh.Describe() : "";
}

TrainingRun RunTraining(const TrainConfig& config, const RankContext& rank, int ranks_in_process,
                        TrainingObserver& observer) {
  const int64_t limit = config.memory_per_rank * ranks_in_process;
  if (!rank.device.is_cuda()) {
    MemoryTracker::Install();  // before the model: its weights count
    if (limit > 0) MemoryTracker::SetLimit(limit, MemoryLimitName(config.memory_per_rank, 0));
  }
  StartupBreakdown startup = rank.startup;
  std::shared_ptr<TrainTask> task = MakeTask(config);
  startup.End(&StartupBreakdown::data_s);
  Trainer trainer(config, std::move(task), rank);
  startup.End(&StartupBreakdown::model_s);
  if (!config.resume.empty()) {
    LoadCheckpoint(config.resume, trainer, config);
    startup.End(&StartupBreakdown::resume_s);
  }
  ForwardPipeline forward(trainer.model());
  observer.Started(trainer);
  TrainingRun run;
  auto evaluate = [&] {
    const EvalMetrics e = Evaluate(forward, trainer.task(), trainer.step());
    run.evals.push_back(e);
    observer.Evaluated(e, trainer.task());
    return e;
  };
  auto checkpoint = [&] {
    observer.Checkpointed(SaveCheckpoint(config.checkpoint_dir, trainer, config, rank.world));
  };
  const int64_t first_step = trainer.step();  // after a resume, not 0
  while (trainer.step() < config.steps) {
    if (limit > 0 && MemoryTracker::installed()) {
      MemoryTracker::SetLimit(limit, MemoryLimitName(config.memory_per_rank, trainer.step() + 1));
    }
    const StepMetrics m = trainer.Step();
    if (m.step == first_step + 1) startup.End(&StartupBreakdown::first_step_s);
    if (limit > 0 && rank.device.is_cuda()) {
      const DeviceMemory memory = ReadDeviceMemory(rank.device);
      CONVEYOR_CHECK(memory.peak_allocated_bytes <= limit)
          << "rank " << rank.rank << ", step " << m.step << ": the GPU's tensors peaked at "
          << memory.peak_allocated_bytes << " bytes, over "
          << MemoryLimitName(config.memory_per_rank, m.step) << " (" << limit << " bytes)";
    }
    Count(m, first_step, config, run);
    observer.Stepped(m, trainer);
    const bool last = m.step == config.steps;
    if (config.eval_every > 0 && m.step % config.eval_every == 0 && !last) evaluate();
    if (!config.checkpoint_dir.empty() && !last && config.checkpoint_every > 0 &&
        m.step % config.checkpoint_every == 0) {
      checkpoint();
    }
  }
  run.final_eval = evaluate();
  run.ranks = trainer.RankReports(startup);
  const SimResult predicted = PredictFromMeasuredCosts(trainer);
  observer.Measured(trainer, predicted);
  if (!config.checkpoint_dir.empty()) checkpoint();
  run.sample = Sample(forward, config);
  if (rank.rank != 0) return run;
  run.steps = trainer.step();
  run.baseline_accuracy = trainer.task().BaselineAccuracy();
  const int pp = trainer.model().program().layout.num_ranks();
  run.measured_bubble = MeasuredBubble(run.ranks, trainer.measurements().pipeline_s(),
                                       trainer.sharing().Room(pp) / pp);
  run.predicted_bubble = predicted.bubble_fraction;
  run.measured_pipeline_s = trainer.measurements().pipeline_s();
  run.predicted_pipeline_s = predicted.makespan;
  run.sharing = trainer.sharing().Describe();
  run.hop_s = trainer.hop_s();
  run.exposed_comm = ExposedCommFraction(run.ranks);
  run.trace_dir = config.trace;
  run.mesh = MeshDescription(trainer);
  run.replicas = trainer.model().mesh().dp();
  run.optimizer_state_bytes = trainer.optimizer_state_bytes();
  run.adamw_kernel = AdamWKernelName(trainer.adamw_kernel());
  const std::vector<ParameterShapes> shapes = trainer.task().model()->LayerShapes();
  const int64_t parameters = CountParameters(shapes);
  run.trained_parameters =
      config.model.lora_rank > 0
          ? CountParameters(shapes, [](const std::string& name) { return IsLoraParameter(name); })
          : parameters;
  run.frozen_parameters = parameters - run.trained_parameters;
  // A gradient and AdamW's two moments, fp32 each.
  run.frozen_state_bytes = run.frozen_parameters * 3 * static_cast<int64_t>(sizeof(float));
  if (trainer.loss_scaler().enabled()) run.loss_scale = trainer.loss_scaler().scale();
  return run;
}

}  // namespace conveyor
