// One rank's share of a training run: a PipelineModel (pipeline_model.h: the rank's device,
// groups and stages) and what training it takes: each step, the pipeline's forward and
// backward, sums of shared gradients, global gradient clipping, dynamic loss scaling and
// AdamW with warm-up and cosine decay. Every step is recorded (LastTimeline) and added to
// this rank's measurements (measurements()); RankReports gathers them from every rank.
//
// What is built on a trainer lives beside it: the rank reports (rank_report.h),
// PredictFromMeasuredCosts (measured_costs.h), checkpoints (checkpoint.h); evaluation and
// generation take its model (forward_pipeline.h, evaluate.h, generate.h); the checks made
// before any rank starts are in preflight.h.
//
// Each data-parallel replica runs the whole pipeline on its slice of every batch
// (SliceBatch), and its stages' gradients are summed across the replicas while the pipeline
// still runs (DataParallelReducer, started at each stage's REDUCE_GRAD): each parameter's over
// the group its layout names (ParameterSpec::grad_sum; one reducer a group). With tp > 1 the
// replicated parameters are counted once in the gradient norm. With config.zero = 1 and dp > 1
// the AdamW state is sharded across each DP group (ZeRO stage 1, sharded_adamw.h): the
// reducer reduce-scatters the gradients so that each replica receives the sum of its range
// only (shard_layout.h; shared parameters stay whole), each replica keeps and updates 1/dp of
// the state and the replicas all-gather the updated weights; with dp = 1 it is the plain
// AdamW. Building a trainer installs the counting CPU allocator (memory_tracker.h): it
// measures. Nothing in a step waits for the device until its end (the loss gather).
//
// Every rank constructs a Trainer with the same config and task and calls the same methods
// in the same order (they are collective). Losses do not depend on the schedule, pp or dp:
// the weights, data and reductions are functions of (seed, step, layer, sample) only. Not
// thread-safe; one per rank, on the thread that built it. The rank's world must outlive the
// trainer.
#ifndef CONVEYOR_TRAIN_TRAINER_H_
#define CONVEYOR_TRAIN_TRAINER_H_

#include <future>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "conveyor/nn/weight_cast.h"
#include "conveyor/optim/loss_scaler.h"
#include "conveyor/optim/optimizer.h"
#include "conveyor/profile/step_recorder.h"
#include "conveyor/sim/compute_sharing.h"
#include "conveyor/timeline/timeline.h"
#include "conveyor/train/data_parallel_reducer.h"
#include "conveyor/train/pipeline_gradients.h"
#include "conveyor/train/pipeline_model.h"
#include "conveyor/train/rank_measurements.h"
#include "conveyor/train/rank_report.h"
#include "conveyor/train/train_config.h"
#include "conveyor/train/train_task.h"

namespace conveyor {

struct StepMetrics {
  int64_t step = 0;  // 1-based: the update just made
  double loss = 0;
  double lr = 0;
  double grad_norm = 0;  // before clipping
  double seconds = 0;
  double tokens_per_s = 0;
  DataParallelStats dp;  // the gradient reduction across replicas (zeros when dp == 1)
  // The loss or the gradient norm was NaN or infinite and config.skip_nonfinite_steps is
  // set, or the gradients overflowed the loss scale: no update was made (otherwise Step()
  // throws instead).
  bool skipped = false;
  bool overflow = false;  // skipped because the scaled gradients overflowed; scale halved
  double loss_scale = 1;  // the scale the step's backward ran with (1: loss scaling off)
  // The step's auxiliary losses (auxiliary_loss.h), each of the model's names
  // (ModelTask::AuxiliaryLossNames) once: share x term summed over the micro-batches, the
  // data-parallel replicas and every layer that attaches it, as the loss is (empty for a model
  // without any). Not part of `loss`.
  std::map<std::string, double> auxiliary_losses;
  // Tokens each expert of each MoE block (ModelTask::ExpertBlocks, by name) received in the
  // step, summed over the micro-batches and the data-parallel replicas (each token counted
  // once for each of its k experts). Empty for a model without any.
  std::map<std::string, std::vector<double>> expert_load;
  // Of those, the copies each block dropped over its capacity (MoeConfig::capacity_factor);
  // a block that dropped none is absent.
  std::map<std::string, double> tokens_dropped;
  // Seconds the step waited for its batch: the whole read when it was not read ahead, and
  // 0 when the read ahead (on a thread, during the previous step) was done in time.
  double data_s = 0;
};

// The most and the mean tokens an expert of one block received (StepMetrics::expert_load).
double ExpertLoadMax(const std::vector<double>& load);
double ExpertLoadMean(const std::vector<double>& load);

class Trainer {
 public:
  // `rank.world` has dp x tp x pp ranks (config.dp 0: as many replicas as fit), or is null
  // for one rank. Throws UserError for a configuration that cannot run (PipelineModel's) before
  // any step. Collective: the ranks build the model (groups, partition) and agree on a clock
  // origin and the hop time.
  Trainer(const TrainConfig& config, std::shared_ptr<const TrainTask> task,
          const RankContext& rank);

  // One optimizer step. Throws UserError naming the step when its loss or gradient norm is
  // NaN or infinite (the update is not made), unless config.skip_nonfinite_steps: then the
  // step is skipped and counted. With loss scaling on, gradients that overflowed the scale
  // (finite loss, non-finite norm, scale above 1) skip the step and halve the scale instead.
  // Every rank sees the same loss and norm, so every rank throws or skips alike. Collective.
  StepMetrics Step();

  int64_t step() const { return step_; }
  const TrainConfig& config() const { return model_.config(); }
  const TrainTask& task() const { return *task_; }
  // The model on this rank: device, mesh, groups, program, partition, stages.
  PipelineModel& model() { return model_; }
  const PipelineModel& model() const { return model_; }
  // AdamW, or its ZeRO-1 sharding (whose State() is collective over the DP group).
  Optimizer& optimizer() { return *optimizer_; }
  // Bytes of optimizer state this rank holds (0 before the first update).
  int64_t optimizer_state_bytes() const { return optimizer_->StateBytes(); }
  // Continue as if `step` updates had been made (after loading a checkpoint).
  void set_step(int64_t step) { step_ = step; }
  // Dynamic loss scaling (config.loss_scale; off when disabled): its state goes into
  // checkpoints and comes back from them.
  LossScaler& loss_scaler() { return loss_scaler_; }

  // What this rank measured over the steps this trainer ran.
  const RankMeasurements& measurements() const { return measurements_; }
  // The kernels AdamW's update runs through (config.adamw_kernel resolved: never kAuto).
  AdamWKernel adamw_kernel() const { return adamw_kernel_; }
  // Every rank's report of the steps so far (GatherRankReports), each with the start-up
  // breakdown its rank passed (zeros where none): collective over the world.
  std::vector<RankReport> RankReports(const StartupBreakdown& startup = {}) const;
  // Records every step; its ForwardBytes() are the bytes each forward of this rank's stages
  // left allocated.
  const StepRecorder& recorder() const { return *recorder_; }
  // This rank's measured timeline of its last step, seconds since a clock origin all ranks
  // share: computes, posts and waits, the phases after the pipeline ("sum shared grads",
  // "grad norm", "gather loss", "optimizer"), every collective of the data- and
  // tensor-parallel groups on those axes' tracks, and the counters of StepRecorder.
  const Timeline& LastTimeline() const { return recorder_->step(); }
  // One-way seconds of one micro-batch's activation between neighbouring ranks, measured
  // when the trainer was built (MeasureHopLatency); 0 on one rank.
  double hop_s() const { return hop_s_; }
  // Which ranks of this pipeline share a machine's cores (compute_placement.h); empty on a
  // GPU. Measured compute times are de-contended by it, and the simulator told of it.
  const ComputeSharing& sharing() const { return sharing_; }

 private:
  // This rank's stages' auxiliary losses of the step, in auxiliary_names_'s order.
  std::vector<double> AuxiliaryLossValues(const PipelineRank& pipeline) const;
  // This rank's stages' expert loads of the step in RankStepReport::expert_load's layout,
  // each block's count reset.
  std::vector<double> TakeExpertLoads() const;

  std::shared_ptr<const TrainTask> task_;
  PipelineModel model_;
  // The gradient reductions: one for each group of PipelineModel::GradientSums with more
  // than one rank, summing the parameters whose grad_sum resolves to it.
  struct GradientReduction {
    GradientSum sum;
    std::unique_ptr<DataParallelReducer> reducer;
  };
  std::vector<GradientReduction> gradient_sums_;
  std::unique_ptr<PipelineGradients> gradients_;
  std::unique_ptr<Optimizer> optimizer_;
  LrSchedule schedule_;
  LossScaler loss_scaler_;
  int64_t step_ = 0;
  // This replica's share of the next step's batch, read on a thread while a step runs
  // (TrainTask's methods are safe from any thread); for step next_share_step_.
  std::future<TrainTask::ReplicaBatch> next_share_;
  int64_t next_share_step_ = -1;

  std::unique_ptr<StepRecorder> recorder_;
  double clock_origin_ = 0;  // SharedClockOrigin
  double hop_s_ = 0;
  ComputeSharing sharing_;
  std::vector<std::string> auxiliary_names_;  // the model's, in the order the reports carry
  std::vector<std::pair<std::string, int>> expert_blocks_;  // the model's (name, experts)
  double startup_s_ = -1;  // process start to this trainer's first step; -1 before it
  std::optional<WeightCastCache> weight_casts_;    // config.cache_weight_casts, bf16/fp16
  AdamWKernel adamw_kernel_ = AdamWKernel::kLoop;  // config.adamw_kernel on the model's device
  RankMeasurements measurements_;
};

}  // namespace conveyor

#endif  // CONVEYOR_TRAIN_TRAINER_H_
