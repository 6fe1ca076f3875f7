// One rank's share of a training run: builds its stages from the task's layers (split by
// cost over the schedule's stages), then runs steps: pipeline forward and backward, sums of
// shared gradients, global gradient clipping, AdamW with warm-up and cosine decay. Every
// step is recorded (LastTimeline) and added to this rank's totals (totals()).
//
// What is built on a trainer lives beside it: GatherRankMetrics (rank_metrics.h),
// PredictFromMeasuredCosts (measured_costs.h), ForwardPipeline for evaluation and generation
// (forward_pipeline.h, evaluate.h, generate.h), checkpoints (checkpoint.h); the checks made
// before any rank starts are in preflight.h.
//
// The ranks form a mesh (mesh.h) of dp x tp x pp: each data-parallel replica runs the whole
// pipeline on its slice of every batch (SliceBatch), and its stages' gradients are summed
// across the replicas while the pipeline still runs (DataParallelReducer, started at each
// stage's REDUCE_GRAD). The process groups (every TP group, DP group and pipeline, in that
// order, then the shared-parameter groups inside each pipeline) are created in the
// constructor, in one order on every rank. With tp > 1 every stage holds this rank's
// tensor-parallel shard of its layers (tensor_parallel.h); the replicated parameters are
// counted once in the gradient norm. With config.zero = 1 and dp > 1 the AdamW state is
// sharded across each DP group (ZeRO stage 1, sharded_adamw.h): the reducer reduce-scatters
// the gradients so that each replica receives the sum of its range only (shard_layout.h;
// shared parameters stay whole), each replica keeps and updates 1/dp of the state and the
// replicas all-gather the updated weights; with dp = 1 it is the plain AdamW.
//
// Devices (config.device, compute_device.h): the stages' parameters, gradients, optimizer
// state, activations and batches live on this rank's device; losses, timings and metrics are
// gathered on the CPU. On CUDA the constructing thread gets the device as its current device
// and a stream of its own from the pool as its current stream (ranks as threads sharing a
// GPU compute side by side); every later call must come from that thread. Nothing in a
// step waits for the device until its end (the loss gather).
//
// Every rank constructs a Trainer with the same config and task and calls the same methods
// in the same order (they are collective). Losses do not depend on the schedule, pp or dp:
// the weights, data and reductions are functions of (seed, step, layer, sample) only. Not
// thread-safe; one per rank. `world` must outlive the trainer.
#ifndef CONVEYOR_TRAIN_TRAINER_H_
#define CONVEYOR_TRAIN_TRAINER_H_

#include <memory>
#include <string>
#include <vector>

#include "conveyor/comm/transport.h"
#include "conveyor/mesh/mesh.h"
#include "conveyor/partition/partition.h"
#include "conveyor/profile/step_recorder.h"
#include "conveyor/profile/timed_transport.h"
#include "conveyor/runtime/pipeline_rank.h"
#include "conveyor/timeline/timeline.h"
#include "conveyor/train/data_parallel_reducer.h"
#include "conveyor/train/grad_sync.h"
#include "conveyor/train/loss_scaler.h"
#include "conveyor/train/optimizer.h"
#include "conveyor/train/rank_totals.h"
#include "conveyor/train/task.h"
#include "conveyor/train/train_config.h"

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
};

class Trainer {
 public:
  // `world` has dp x tp x pp ranks (config.dp 0: as many replicas as fit), or is null for
  // one rank. Throws UserError for a configuration that cannot run (a world the mesh does
  // not fill, schedule preconditions, fewer layers than stages, ...) before any step.
  // Collective: the ranks create the process groups and agree on the partition
  // (config.partition = "profile" averages their timings), a clock origin and the hop time.
  Trainer(const TrainConfig& config, std::shared_ptr<const TrainTask> task, Transport* world);

  // One optimizer step. Throws UserError naming the step when its loss or gradient norm is
  // NaN or infinite (the update is not made), unless config.skip_nonfinite_steps: then the
  // step is skipped and counted. With loss scaling on, gradients that overflowed the scale
  // (finite loss, non-finite norm, scale above 1) skip the step and halve the scale instead.
  // Every rank sees the same loss and norm, so every rank throws or skips alike. Collective.
  StepMetrics Step();

  int64_t step() const { return step_; }
  const TrainConfig& config() const { return config_; }
  const TrainTask& task() const { return *task_; }
  // Every rank of the run (null with one rank) and this rank in it.
  Transport* world() const { return world_; }
  int rank() const { return rank_; }
  // Where this rank computes (config.device resolved).
  const c10::Device& device() const { return device_; }
  const Mesh& mesh() const { return mesh_; }
  const MeshCoords& coords() const { return coords_; }
  // The pipeline this rank is a stage rank of (the ranks sharing its dp and tp coordinates;
  // the world itself when it is the whole world; null with one rank) and this rank in it.
  Transport* pipeline_group() const { return pipeline_group_; }
  // This rank's tensor-parallel shard of the model (size 1 without TP).
  const TensorParallel& tensor_parallel() const { return tp_; }
  int pipeline_rank() const { return coords_.pp; }
  // Whether this rank's pipeline is the one that writes checkpoints and traces (dp = tp = 0:
  // the other replicas hold the same weights; the other TP ranks hand it their shards).
  bool leads_replicas() const { return coords_.dp == 0 && coords_.tp == 0; }
  // The lowered program this rank runs every step.
  const Program& program() const { return program_; }
  const std::vector<LayerRange>& partition() const { return partition_; }
  // This rank's parameters (global names; a name twice for two local copies).
  NamedTensors Parameters() const { return pipeline_->NamedParameters(); }
  // AdamW, or its ZeRO-1 sharding (whose State() is collective over the DP group).
  Optimizer& optimizer() { return *optimizer_; }
  // Bytes of optimizer state this rank holds (0 before the first update).
  int64_t optimizer_state_bytes() const { return optimizer_->StateBytes(); }
  PipelineRank& pipeline() { return *pipeline_; }
  // Continue as if `step` updates had been made (after loading a checkpoint).
  void set_step(int64_t step) { step_ = step; }
  // Dynamic loss scaling (config.loss_scale; off when disabled): its state goes into
  // checkpoints and comes back from them.
  LossScaler& loss_scaler() { return loss_scaler_; }

  // What this rank measured over the steps this trainer ran.
  const RankTotals& totals() const { return totals_; }
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

 private:
  TrainConfig config_;
  std::shared_ptr<const TrainTask> task_;
  Transport* world_;
  int rank_;
  c10::Device device_;
  Mesh mesh_;
  MeshCoords coords_;
  // The groups this rank belongs to, created in the constructor (a group that is the whole
  // world is `world`; a group of one rank is null, but for the pipeline, which always has
  // a transport when the world has one).
  std::unique_ptr<Transport> tp_owned_, dp_owned_, pp_owned_;
  // The TP and DP groups, timed (their collectives become phases on their tracks).
  std::unique_ptr<TimedTransport> tp_timed_, dp_timed_;
  Transport* tp_group_ = nullptr;
  Transport* dp_group_ = nullptr;
  Transport* pipeline_group_ = nullptr;
  TensorParallel tp_;
  std::unique_ptr<DataParallelReducer> dp_reducer_;  // null when dp == 1
  Program program_;
  std::vector<LayerRange> partition_;
  std::unique_ptr<PipelineRank> pipeline_;
  std::unique_ptr<GradSync> grad_sync_;
  std::unique_ptr<Optimizer> optimizer_;
  LrSchedule schedule_;
  LossScaler loss_scaler_;
  int64_t step_ = 0;

  std::unique_ptr<StepRecorder> recorder_;
  double clock_origin_ = 0;  // SharedClockOrigin
  double hop_s_ = 0;
  RankTotals totals_;
};

}  // namespace conveyor

#endif  // CONVEYOR_TRAIN_TRAINER_H_
