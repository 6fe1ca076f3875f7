// One rank's share of a training run: builds its stages from the task's layers (split by
// cost over the schedule's stages), then runs steps: pipeline forward and backward, sums of
// shared gradients, global gradient clipping, AdamW with warm-up and cosine decay.
//
// Every rank constructs a Trainer with the same config and task and calls the same methods
// in the same order (they are collective). Losses do not depend on the schedule or pp: the
// weights, data and reductions are functions of (seed, step, layer, sample) only.
#ifndef CONVEYOR_TRAIN_TRAINER_H_
#define CONVEYOR_TRAIN_TRAINER_H_

#include <memory>
#include <string>
#include <vector>

#include "conveyor/comm/transport.h"
#include "conveyor/partition/partition.h"
#include "conveyor/profile/comm_breakdown.h"
#include "conveyor/profile/step_recorder.h"
#include "conveyor/runtime/pipeline_rank.h"
#include "conveyor/sim/cost_model.h"
#include "conveyor/timeline/timeline.h"
#include "conveyor/train/grad_sync.h"
#include "conveyor/train/optimizer.h"
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
  // The loss or the gradient norm was NaN or infinite and config.skip_nonfinite_steps is
  // set: no update was made (without it, Step() throws instead).
  bool skipped = false;
};

// Where one rank's pipeline time went, averaged over the steps after the first (seconds per
// step; the whole step when only one ran). bubble_fraction = idle / pipeline step time,
// where idle = step - compute: waiting for messages, posting them, bookkeeping. The waits
// are split as CommBreakdown (conveyor/profile/comm_breakdown.h) describes.
struct RankMetrics {
  int rank = 0;
  double step_s = 0;     // the pipeline part of a step (the executor's)
  double compute_s = 0;  // F, B, I, W
  double comm_wait_s = 0;
  double transfer_wait_s = 0;    // of comm_wait_s: exposed communication
  double dependency_wait_s = 0;  // of comm_wait_s: waiting for a peer's compute
  double post_s = 0;             // handing messages to the transport
  double idle_s = 0;
  double bubble_fraction = 0;
  double comm_overlap = 1;  // CommBreakdown::overlap_fraction
  double sent_bytes = 0;
  // Most CPU memory allocated during a step beyond what was held when it began (the
  // activations and gradients in flight), over all steps; the process's count, so with
  // ranks as threads it covers all of them.
  double peak_activation_bytes = 0;
  // The simulator's activation model for the same program: the most micro-batches this
  // rank holds at once (counted from F until B or W), and the most bytes, each forward
  // counted with the bytes a forward of its stage was measured to leave allocated.
  double predicted_peak_microbatches = 0;
  double predicted_peak_activation_bytes = 0;
};

// The whole pipeline's bubble as the simulator counts it: 1 - (sum of the ranks' compute) /
// (ranks x pipeline_s), pipeline_s being the time from the first rank's start of the
// pipeline to the last rank's end (Trainer::pipeline_s()).
double MeasuredBubble(const std::vector<RankMetrics>& ranks, double pipeline_s);
// The share of the ranks' step time blocked on messages in transit: sum of transfer_wait_s
// over sum of step_s.
double ExposedCommFraction(const std::vector<RankMetrics>& ranks);

struct EvalMetrics {
  int64_t step = 0;
  double loss = 0;
  double accuracy = -1;  // -1 when the task has none
};

class Trainer {
 public:
  // `world` has config.pp ranks (null when pp == 1). Throws UserError for a configuration
  // that cannot run (schedule preconditions, fewer layers than stages, ...) before any step.
  Trainer(const TrainConfig& config, std::shared_ptr<const TrainTask> task, Transport* world);

  // One optimizer step. Throws UserError naming the step when its loss or gradient norm is
  // NaN or infinite (the update is not made), unless config.skip_nonfinite_steps: then the
  // step is skipped and counted. Every rank sees the same loss and norm, so every rank
  // throws or skips alike. Collective.
  StepMetrics Step();
  EvalMetrics Evaluate();

  int64_t step() const { return step_; }
  int rank() const { return rank_; }
  const Program& program() const { return program_; }
  const std::vector<LayerRange>& partition() const { return partition_; }
  // This rank's parameters (global names; a name twice for two local copies).
  NamedTensors Parameters() const { return pipeline_->NamedParameters(); }
  AdamW& optimizer() { return optimizer_; }
  PipelineRank& pipeline() { return *pipeline_; }
  // Continue as if `step` updates had been made (after loading a checkpoint).
  void set_step(int64_t step) { step_ = step; }

  // Every rank's metrics, on every rank. Collective.
  std::vector<RankMetrics> GatherRankMetrics();
  // The simulator's bubble fraction for this run's program under the per-stage F, B, I, W
  // times measured so far and the hop time measured at start (hop_s). Collective.
  double PredictedBubble();
  // The simulator's seconds for the pipeline part of one step under the same costs (the
  // limit the schedule allows on this machine). Collective.
  double PredictedPipelineSeconds();
  // One-way seconds of one micro-batch's activation between neighbouring ranks, measured
  // when the trainer was built (MeasureHopLatency); 0 on one rank.
  double hop_s() const { return hop_s_; }
  // Mean seconds from the first rank's start to the last rank's end of a step's pipeline
  // (its makespan, comparable with the simulator's), over the steps after the first.
  double pipeline_s() const {
    return pipeline_total_s_ / static_cast<double>(std::max<int64_t>(measured_steps_, 1));
  }
  // The simulator's timeline of one step under those measured costs. Collective.
  Timeline PredictedTimeline();
  // This rank's measured timeline of its last step, seconds since a clock origin all ranks
  // share: computes, posts and waits, the phases after the pipeline ("sum shared grads",
  // "grad norm", "optimizer", "all-reduce loss"), and the counters of StepRecorder.
  const Timeline& LastTimeline() const { return recorder_->step(); }

  // The next token after each sample of `inputs` (n, T): a forward-only pipeline, then the
  // last position's logits sampled at `temperature` (0 = greedy) with a generator drawn from
  // (seed, T). Returns the same (n) tokens on every rank. Collective.
  at::Tensor NextTokens(const at::Tensor& inputs, double temperature, uint64_t seed);

 private:
  // The element-wise sum of `t` over the ranks (`t` itself with one rank). Collective.
  at::Tensor SumOverRanks(at::Tensor t);
  // Adds the step just recorded to the sums: per-op compute times, step stats, `comm`.
  // `pipeline_s`: this step's first start to last end of the pipeline over all ranks.
  void Account(const CommBreakdown& comm, double pipeline_s);
  // Runs `mbs` through a forward-only program over this rank's stages (same placement).
  Executor::Inference Infer(const std::vector<MicroBatch>& mbs);

  TrainConfig config_;
  std::shared_ptr<const TrainTask> task_;
  Transport* world_;
  int rank_;
  Program program_;
  std::vector<LayerRange> partition_;
  std::unique_ptr<PipelineRank> pipeline_;
  std::unique_ptr<GradSync> grad_sync_;
  AdamW optimizer_;
  LrSchedule schedule_;
  int64_t step_ = 0;

  // Measured: per (stage, op) total compute seconds and counts; sums over the steps.
  std::unique_ptr<StepRecorder> recorder_;
  double hop_s_ = 0;
  std::map<std::pair<int, Op>, std::pair<double, int64_t>> op_time_;
  StepStats totals_;
  double pipeline_total_s_ = 0;  // sum of the measured steps' pipeline_s
  double clock_origin_ = 0;      // SharedClockOrigin
  CommBreakdown comm_totals_;
  int64_t steps_run_ = 0;       // by this process
  int64_t measured_steps_ = 0;  // of those, counted in the totals (all but the first)
  int64_t peak_step_bytes_ = 0;
  // The simulator's cost model from op_time_ (gathered over all ranks).
  CostModel MeasuredCosts();
};

// Checks, cheaply and before any rank starts, what would stop a run: the configuration, the
// schedule's preconditions, enough layers for its stages, the corpus path. UserError.
void PreflightCheck(const TrainConfig& config);

// Checks, before any rank starts, the files a run reads and writes, so that no run fails
// after its work is done: builds the task (MakeTask: the corpus loads, is not empty, is
// longer than a sequence, has the classes asked for), then checks that the metrics file
// can be written (its folder exists and takes new files; an existing folder is refused)
// and that the trace and checkpoint folders take new files, or that their nearest existing
// parent does. UserError naming the flag and the path.
void PreflightFiles(const TrainConfig& config);

// The per-layer costs config.partition asks for: parameter counts, forward FLOPs from the
// model configuration, 1 each, or ("profile") the measured forward + backward seconds of
// each layer on the first training micro-batch (fastest of three rounds).
std::vector<double> LayerCosts(const TrainConfig& config, const TrainTask& task,
                               const nn::LayerList& layers);

}  // namespace conveyor

#endif  // CONVEYOR_TRAIN_TRAINER_H_
