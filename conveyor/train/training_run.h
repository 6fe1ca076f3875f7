// One rank's whole `conveyor train` run: the trainer built (and resumed from a checkpoint),
// the steps with the evaluations and checkpoints between them, the final evaluation, traces,
// checkpoint and sample text, and what rank 0 reports of it all (a TrainingRun: the command
// prints it, cli/train_summary.h, and writes it to --metrics). As it goes, the run tells a
// TrainingObserver (the command's progress lines).
//
// Memory: on the CPU the rank's allocations are counted from before the model is built, and
// config.memory_per_rank (over all the process's ranks) is enforced from then on, each step
// named in the error; on a GPU the caching allocator's peak is checked after each step.
#ifndef CONVEYOR_TRAIN_TRAINING_RUN_H_
#define CONVEYOR_TRAIN_TRAINING_RUN_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "conveyor/comm/rank_context.h"
#include "conveyor/sim/simulator.h"
#include "conveyor/train/data_parallel_reducer.h"
#include "conveyor/train/evaluate.h"
#include "conveyor/train/rank_report.h"
#include "conveyor/train/train_config.h"
#include "conveyor/train/train_task.h"
#include "conveyor/train/trainer.h"

namespace conveyor {

// A run as a rank saw it (RunTraining says which rank fills what).
struct TrainingRun {
  int64_t steps = 0;      // the trainer's step at the end
  double final_loss = 0;  // the last step that was not skipped (0 without one)
  std::map<std::string, double> auxiliary_losses;  // that step's (StepMetrics'); empty: none
  std::map<std::string, std::vector<double>> expert_load;  // that step's; empty: none
  double tokens_per_s = 0;                                 // the last step's
  int64_t skipped_steps = 0;      // non-finite steps skipped, overflows included
  int64_t overflow_steps = 0;     // steps skipped because gradients overflowed the loss scale
  double loss_scale = 0;          // the loss scale at the end; 0: loss scaling off
  EvalMetrics final_eval;         // accuracy < 0 when the task has none
  double baseline_accuracy = -1;  // the majority class's, with an accuracy
  std::vector<RankReport> ranks;
  double measured_bubble = 0;       // MeasuredBubble
  double predicted_bubble = 0;      // the simulator's, from measured costs
  double measured_pipeline_s = 0;   // the pipeline's makespan, a step on average
  double predicted_pipeline_s = 0;  // the simulator's, from measured costs
  std::string sharing;              // "4 ranks on 2 cores"; empty: no rank shares its cores
  double hop_s = 0;
  double exposed_comm = 0;            // ExposedCommFraction
  std::string mesh;                   // Mesh::Describe when dp or tp > 1; empty otherwise
  int replicas = 1;                   // the mesh's dp (also when the world decided it)
  DataParallelStats dp;               // rank 0's gradient reduction, summed over the steps
  int64_t optimizer_state_bytes = 0;  // rank 0's AdamW state (1/dp of it with --zero 1)
  std::string adamw_kernel;           // AdamWKernelName of Trainer::adamw_kernel
  // The model's parameters that train and those frozen (a LoRA run's base: nn/lora.h), each
  // tensor once, and the bytes the frozen ones' fp32 gradients and AdamW moments would take
  // over the whole mesh's one copy of the model (12 a parameter).
  int64_t trained_parameters = 0;
  int64_t frozen_parameters = 0;
  int64_t frozen_state_bytes = 0;
  std::string trace_dir;                  // empty: no traces written
  std::string sample;                     // printable sample text; empty: none
  double data_s = 0;                      // rank 0's wait for its batch, a step on average
  double first_data_s = 0;                // of them, the first step's (never read ahead)
  std::vector<StepMetrics> step_metrics;  // every step this run made, in order
  std::vector<EvalMetrics> evals;         // every evaluation, the final one last
};

// What a run tells as it goes, on every rank. The trainer is passed to be read, not stepped.
class TrainingObserver {
 public:
  virtual ~TrainingObserver() = default;
  // The trainer built and, with config.resume, its checkpoint loaded: before the first step.
  virtual void Started(Trainer& trainer) = 0;
  // After each step, skipped ones included.
  virtual void Stepped(const StepMetrics& step, Trainer& trainer) = 0;
  virtual void Evaluated(const EvalMetrics& eval, const TrainTask& task) = 0;
  // A checkpoint written: where (SaveCheckpoint's answer).
  virtual void Checkpointed(const std::string& where) = 0;
  // After the final evaluation, before the last checkpoint: the trainer's last step as it
  // ran, and the simulator's prediction of it from the costs measured (its timeline).
  virtual void Measured(const Trainer& trainer, const SimResult& predicted) = 0;
};

// Mesh::Describe of the trainer's mesh when dp or tp > 1; empty otherwise.
std::string MeshDescription(const Trainer& trainer);

// Runs `config` as `rank`, `ranks_in_process` ranks sharing this process's allocator (rank
// threads: their memory limits add up). Every rank fills the losses, the skipped and
// overflowed steps, final_eval, ranks (Trainer::RankReports) and sample, and from its own
// steps tokens_per_s, dp, data_s, first_data_s, step_metrics and evals; rank 0 alone fills
// the rest (baseline_accuracy, steps, the bubbles and pipeline times, sharing, hop_s,
// exposed_comm, trace_dir, mesh, replicas, optimizer_state_bytes, loss_scale). Collective
// over the world; throws UserError for a run that cannot go on (a memory limit exceeded, a
// bad checkpoint).
TrainingRun RunTraining(const TrainConfig& config, const RankContext& rank, int ranks_in_process,
                        TrainingObserver& observer);

}  // namespace conveyor

#endif  // CONVEYOR_TRAIN_TRAINING_RUN_H_
