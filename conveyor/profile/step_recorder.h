// Records what one rank does in each training step, for metrics and traces: every span the
// executor reports (computes, posts, waits), the phases around the pipeline that the trainer
// names (shared-gradient sums, the norm all-reduce, the optimizer, ...), and after each span
// two counters: "activation bytes" (bytes allocated since the step began: on a GPU its
// caching allocator's count, device_memory.h; on the CPU MemoryTracker's when installed, else
// 0) and "bytes sent" (the step's message payload so far).
//
// Times are seconds since `origin`, a time of Executor::Now(); ranks that share an origin
// (SharedClockOrigin) have comparable times. The recorder keeps the current step only.
//
// Cost per span: a vector append and two counter samples (measured by `conveyor bench
// overhead`). Not thread-safe: one recorder per rank, used on the executor's thread.
#ifndef CONVEYOR_PROFILE_STEP_RECORDER_H_
#define CONVEYOR_PROFILE_STEP_RECORDER_H_

#include <map>
#include <string>
#include <vector>

#include "conveyor/comm/transport.h"
#include "conveyor/device/device_memory.h"
#include "conveyor/runtime/executor.h"
#include "conveyor/timeline/timeline.h"

namespace conveyor {

// A clock origin every rank agrees on (collective). When all ranks run on one host (same host
// name) they share the steady clock and get rank 0's reading: their times compare exactly.
// Across hosts each rank takes its own reading as it leaves an all-gather (of the host
// names), so times agree to within its exit skew. `world` may be null (one rank).
double SharedClockOrigin(Transport* world);

class StepRecorder {
 public:
  // `device`: where the rank's tensors live (its memory is counted).
  StepRecorder(int rank, int num_ranks, double origin,
               c10::Device device = c10::Device(c10::DeviceType::CPU));

  // Becomes `executor`'s hook (replacing any other); `executor` must outlive its use.
  void Attach(Executor& executor);

  // Starts a new step: drops the last one, takes the memory count as the step's zero and
  // restarts MemoryTracker's peak from it.
  void BeginStep();
  // Records phase `name` of this rank from `start` (an Executor::Now() time) to now.
  void Phase(const std::string& name, double start);
  // Records phase `name` from `start` to `end` (Executor::Now() times) on `track`.
  void Phase(const std::string& name, double start, double end, PhaseTrack track);

  // Gives the step's computes the times the device ran them (Executor::device_runs(): one
  // span per kRun span recorded, in the same order); the counters sampled at their ends move
  // with them. Does nothing when `runs` is empty (the CPU).
  // REQUIRES: runs.size() is the number of kRun spans recorded in this step.
  void UseDeviceTimes(const std::vector<Span>& runs);

  // The current (or last) step: spans, phases and counters of this rank, seconds since origin.
  const Timeline& step() const { return step_; }

  // The most bytes allocated since BeginStep beyond the step's zero (the device's peak, or
  // MemoryTracker's: either is the whole process's, so with ranks as threads sharing a device
  // it covers all of them).
  int64_t PeakBytes() const;
  // The device's allocator counts now, peaks since BeginStep (has_counts false on the CPU).
  DeviceMemory device_memory() const { return ReadDeviceMemory(device_); }

  // Mean bytes a forward leaves allocated (its output and what autograd saves for the
  // backward), per stage of this rank, over every forward recorded so far.
  std::map<int, double> ForwardBytes() const;

 private:
  void OnSpan(const Span& span);
  void Sample(double time, double sent_bytes);

  const int rank_;
  const double origin_;
  Executor* executor_ = nullptr;
  Timeline step_;
  const c10::Device device_;
  int64_t step_base_bytes_ = 0;  // allocated when the step began
  int64_t held_bytes_ = 0;       // at the last sample, relative to the base
  std::map<int, std::pair<double, int64_t>> forward_bytes_;  // stage -> (sum, count)
  std::vector<size_t> run_samples_;  // per kRun span of the step: its first counter sample
};

}  // namespace conveyor

#endif  // CONVEYOR_PROFILE_STEP_RECORDER_H_
