// Runs one rank's share of a lowered program for one training step.
//
// A dumb interpreter: it walks its rank's actions in order.
//   RECV_F / RECV_B  post a receive into a fresh buffer, shaped by the receiving stage's
//                    module (StageModule::InputShape / OutputShape of the micro-batch)
//   F                takes its input from the batch (first stage), from the stage before
//                    it on this rank (direct hand-off), or waits for its posted receive
//   I / B            likewise for the output gradient; then runs the stage's backward
//   W                runs the stage's deferred weight work for that micro-batch
//   SEND_F / SEND_B  post an asynchronous send; its handle (and buffer) is kept until the
//                    transport reports it complete or, at the latest, the end of the step,
//                    when every send is waited for. After a SEND_F the stage drops its own
//                    copy of the output's data (Stage::ReleaseOutput).
//   OVERLAP_F_B      its forward half and its backward half: one after the other (the
//                    forward's output sent between them, before the program's SEND_F), or,
//                    with set_overlap_pairs and the halves on two stages, at once: the
//                    forward half on a helper thread in overlap lane 1 (comm/overlap_lane.h),
//                    the backward half on the executor's thread, so that one half's
//                    all-to-all runs while the other computes; the forward's output is sent
//                    when both are done (no later than the program's SEND_F, which the
//                    verified program orders after the pair). The same computations either
//                    way (the same results, bit for bit): the forward touches its stage and
//                    micro-batch only, every backward runs on the executor's thread.
//   REDUCE_GRAD      the stage's gradients are final: calls the reduce-grad hook, when set
//                    (data-parallel reduction starts there; WithGradReductions places them)
// Buffers are dropped as soon as their consumer ran. Every span of time is measured (two clock
// reads per compute, post and wait) and summed into StepStats; a hook, when set, sees each. On
// a device whose events measure time (a GPU: DeviceTimer) a compute's host span only covers
// its launch: the computes are also marked with events on the rank's stream, without a host
// wait, and resolved once at the end of the step (device_runs()). Any error is rethrown
// with rank, stage, micro-batch and action put before its message, and its kind kept: a
// CommError, UserError or InternalError stays one; anything else (libtorch's errors, an
// allocation failure) becomes a StepError carrying the first line of its message.
//
// Lifetimes: the executor keeps references to the program, the transport and the stages it is
// given; all three must outlive it (PipelineRank owns a copy of the program and the stages,
// and is the usual owner of an executor). It owns nothing else but its buffers.
//
// Not thread-safe; one executor per rank (thread or process). Overlapped pairs run a stage's
// forward on a helper thread, which must be safe for the model: collectives in forward on
// the lane's group (LaneGroups), nothing else shared between two stages' forward and
// backward.
#ifndef CONVEYOR_RUNTIME_EXECUTOR_H_
#define CONVEYOR_RUNTIME_EXECUTOR_H_

#include <ATen/core/Tensor.h>

#include <functional>
#include <map>
#include <set>
#include <vector>

#include "conveyor/comm/transport.h"
#include "conveyor/common/error.h"
#include "conveyor/device/device_timer.h"
#include "conveyor/module/microbatch.h"
#include "conveyor/runtime/stage.h"
#include "conveyor/schedule/program.h"
#include "conveyor/timeline/timeline.h"

namespace conveyor {

// A step failed on this rank for a reason outside conveyor's own kinds: libtorch threw (out
// of memory, a shape its kernel refused) or another library did. The message names rank,
// stage, micro-batch and action, then the original error's first line.
class StepError : public Error {
 public:
  explicit StepError(const std::string& what) : Error(what) {}
};

// Sees every span of a step as it ends (for tracing), times in seconds of the steady clock
// (Executor::Now()):
//   kRun   a compute: F, B, I, W, or a half of OVERLAP_F_B (its own action), waits excluded
//   kPost  a SEND_* / RECV_* action handed to the transport
//   kWait  blocked on a message: RECV_F / RECV_B of the consuming stage and micro-batch
//          before a compute, or SEND_F / SEND_B at the end of the step
// Runs on the executor's thread; must not call back into the executor.
using SpanHook = std::function<void(const Span&)>;

// Called at a REDUCE_GRAD with its stage, on the executor's thread; must return quickly
// (start asynchronous work) and must not call back into the executor.
using ReduceGradHook = std::function<void(Stage& stage)>;

// Where one rank's time went in its step (seconds), and what it sent; kept up to date while
// the step runs (a hook may read it).
struct StepStats {
  double seconds = 0;      // the whole step, the final wait for sends included
  double compute_s = 0;    // the kRun spans (device_runs() where there are those)
  double comm_wait_s = 0;  // the kWait spans
  double post_s = 0;       // the kPost spans
  int64_t sent_bytes = 0;  // payload of the messages sent so far
};

class Executor {
 public:
  // REQUIRES: `program` is lowered (Lower()) and verified; `stages` holds every stage the
  // layout puts on `rank`; `transport` is null only when the program needs no communication.
  // REQUIRES: program, transport and stages outlive the executor (it keeps references).
  // Throws UserError when the stages do not match the layout.
  Executor(const Program& program, int rank, Transport* transport, std::map<int, Stage*> stages,
           at::TensorOptions activation_options);

  // Runs the step. Returns the sum of the scaled losses of the last stages on this rank.
  double RunStep(const std::vector<MicroBatch>& microbatches);

  // Runs a forward-only program (BuildForwardOnly) without autograd: evaluation and
  // generation. With `keep_outputs`, `outputs` gets, per micro-batch index, the output of
  // this rank's last stage (logits), if it has one; else each is dropped once its loss is
  // taken (a micro-batch's logits at a time, not all of them).
  struct Inference {
    double loss = 0;
    std::map<int, at::Tensor> outputs;
  };
  Inference RunInference(const std::vector<MicroBatch>& microbatches, bool keep_outputs = true);

  // Null (the default) turns the hook off.
  void set_hook(SpanHook hook) { hook_ = std::move(hook); }
  // Null (the default): REDUCE_GRAD does nothing.
  void set_reduce_grad_hook(ReduceGradHook hook) { reduce_grad_hook_ = std::move(hook); }
  // Whether OVERLAP_F_B runs its halves at once (above); false (the default): one after the
  // other. On the CPU only: on a GPU the halves would need streams of their own.
  void set_overlap_pairs(bool overlap);
  const StepStats& last_stats() const { return stats_; }
  // The last step's computes as the device ran them, on a device the executor times with
  // events (DeviceTimer::active()): one kRun span per compute, in the order the hook saw
  // them, from the start to the end of its work on the rank's stream (Now() times, anchored
  // at the host's wait for the last one). Empty on the CPU.
  const std::vector<Span>& device_runs() const { return device_runs_; }

  // Seconds on the steady clock: the time base of hook spans.
  static double Now();

 private:
  struct Key {
    int stage, microbatch;
    bool operator<(const Key& o) const {
      return stage != o.stage ? stage < o.stage : microbatch < o.microbatch;
    }
  };
  struct Pending {
    at::Tensor buffer;
    std::shared_ptr<Work> work;  // null for a same-rank hand-off
  };

  // Runs every action of this rank, then waits for the sends; errors get their context.
  void Execute(const std::vector<MicroBatch>& mbs);
  void Run(const Action& a, const std::vector<MicroBatch>& mbs);
  void RunForward(const Action& a, const MicroBatch& mb);
  // RunForward's parts: the input (from the batch, a hand-off or a received message), and
  // where the output goes.
  at::Tensor ForwardInput(const Action& a, const MicroBatch& mb);
  void PlaceOutput(const Action& a, const MicroBatch& mb, const at::Tensor& output);
  void RunBackward(const Action& a, const MicroBatch& mb);
  // OVERLAP_F_B's halves at once (set_overlap_pairs).
  void RunPairAtOnce(const Action& forward, const Action& backward,
                     const std::vector<MicroBatch>& mbs);
  // Removes and returns a pending input, waiting (a kWait span of `recv`) if it is a message.
  at::Tensor Take(std::map<Key, Pending>& from, Key key, const Action& recv);
  // Counts a span into stats_ and shows it to the hook.
  void Emit(const Action& a, SpanKind kind, double start, double end);
  // A compute's start: the host time and, on a timed device, the index of a mark before its
  // work (-1 otherwise). EndRun marks its end and emits its host span.
  struct RunStart {
    double host;
    int mark;
  };
  RunStart StartRun();
  void EndRun(const Action& a, const RunStart& start);
  // Waits once for the step's last compute and turns the marks into device_runs_.
  void ResolveDeviceRuns();
  uint32_t Tag(bool gradient, int stage, int microbatch) const;
  Stage& StageAt(int stage);

  const Program& program_;
  const int rank_;
  Transport* transport_;
  std::map<int, Stage*> stages_;
  at::TensorOptions activation_options_;
  SpanHook hook_;
  ReduceGradHook reduce_grad_hook_;
  DeviceTimer timer_;
  struct RunMarks {
    Action action;
    int start, end;  // DeviceTimer mark indices
  };
  std::vector<RunMarks> run_marks_;  // this step's computes, until resolved
  std::vector<Span> device_runs_;

  std::map<Key, Pending> activations_;         // inputs of this rank's stages, by consumer
  std::map<Key, Pending> gradients_;           // output gradients of this rank's stages
  std::map<Key, at::Tensor> outputs_to_send_;  // by producing stage, waiting for SEND_F
  std::map<Key, at::Tensor> grads_to_send_;    // by producing stage, waiting for SEND_B
  std::set<Key> early_sends_;  // forward halves of OVERLAP_F_B sent before their SEND_F
  std::vector<std::pair<std::shared_ptr<Work>, Action>> sends_;
  StepStats stats_;
  bool overlap_pairs_ = false;              // set_overlap_pairs
  bool inference_ = false;                  // running RunInference
  bool keep_outputs_ = true;                // RunInference's keep_outputs
  std::map<int, at::Tensor> last_outputs_;  // inference: last stages' outputs by micro-batch
};

}  // namespace conveyor

#endif  // CONVEYOR_RUNTIME_EXECUTOR_H_
