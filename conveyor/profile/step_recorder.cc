#include "conveyor/profile/step_recorder.h"

#include <ATen/ATen.h>
#include <unistd.h>

#include <algorithm>

#include "conveyor/common/error.h"
#include "conveyor/profile/memory_tracker.h"
#include "conveyor/profile/tensor_bytes.h"

namespace conveyor {

double SharedClockOrigin(Transport* world) {
  if (world == nullptr || world->world_size() == 1) return Executor::Now();
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  const at::Tensor mine = at::from_blob(host, {sizeof host}, at::kByte).clone();
  bool one_host = true;
  for (const at::Tensor& other : world->AllGather(mine)) one_host = one_host && other.equal(mine);
  // Every rank has entered the all-gather when any leaves it, as with a barrier.
  at::Tensor now = at::scalar_tensor(Executor::Now(), at::kDouble);
  if (one_host) world->Broadcast(now, 0);
  return now.item<double>();
}

StepRecorder::StepRecorder(int rank, int num_ranks, double origin, c10::Device device)
    : rank_(rank), origin_(origin), device_(device) {
  step_.num_ranks = num_ranks;
  step_.time_unit = TimeUnit::kSeconds;
}

void StepRecorder::Attach(Executor& executor) {
  executor_ = &executor;
  executor.set_hook([this](const Span& span) { OnSpan(span); });
}

void StepRecorder::BeginStep() {
  step_.spans.clear();
  step_.phases.clear();
  step_.counters.clear();
  run_samples_.clear();
  ResetDeviceMemoryPeaks(device_);
  MemoryTracker::ResetPeak();
  step_base_bytes_ = TensorBytes(device_);
  held_bytes_ = 0;
  Sample(Executor::Now() - origin_, 0);
}

void StepRecorder::Phase(const std::string& name, double start) {
  Phase(name, start, Executor::Now(), PhaseTrack::kStep);
}

void StepRecorder::Phase(const std::string& name, double start, double end, PhaseTrack track) {
  step_.phases.push_back(conveyor::Phase{rank_, name, start - origin_, end - origin_, track});
}

void StepRecorder::Sample(double time, double sent) {
  held_bytes_ = TensorBytes(device_) - step_base_bytes_;
  step_.counters.push_back(
      CounterSample{rank_, "activation bytes", time, static_cast<double>(held_bytes_)});
  step_.counters.push_back(CounterSample{rank_, "bytes sent", time, sent});
}

void StepRecorder::OnSpan(const Span& span) {
  Span s = span;
  s.start -= origin_;
  s.end -= origin_;
  step_.spans.push_back(s);
  if (s.kind == SpanKind::kRun) run_samples_.push_back(step_.counters.size());
  const int64_t before = held_bytes_;
  Sample(s.end, executor_ != nullptr ? executor_->last_stats().sent_bytes : 0);
  if (s.kind == SpanKind::kRun && s.action.op == Op::kForward) {
    auto& [sum, count] = forward_bytes_[s.action.stage];
    sum += static_cast<double>(held_bytes_ - before);
    ++count;
  }
}

void StepRecorder::UseDeviceTimes(const std::vector<Span>& runs) {
  if (runs.empty()) return;
  CONVEYOR_ASSERT(runs.size() == run_samples_.size())
      << "rank " << rank_ << ": " << runs.size() << " device-timed computes for "
      << run_samples_.size() << " recorded";
  size_t next = 0;
  for (Span& span : step_.spans) {
    if (span.kind != SpanKind::kRun) continue;
    const Span& run = runs[next];
    CONVEYOR_ASSERT(run.action == span.action)
        << "rank " << rank_ << ": device time of " << run.action << " given for " << span.action;
    span.start = run.start - origin_;
    span.end = run.end - origin_;
    const size_t sample = run_samples_[next++];
    step_.counters[sample].time = step_.counters[sample + 1].time = span.end;
  }
  std::stable_sort(step_.counters.begin(), step_.counters.end(),
                   [](const CounterSample& a, const CounterSample& b) { return a.time < b.time; });
  run_samples_.clear();  // indices are stale after the sort
}

int64_t StepRecorder::PeakBytes() const { return PeakTensorBytes(device_) - step_base_bytes_; }

std::map<int, double> StepRecorder::ForwardBytes() const {
  std::map<int, double> mean;
  for (const auto& [stage, sum_count] : forward_bytes_) {
    mean[stage] = sum_count.first / static_cast<double>(sum_count.second);
  }
  return mean;
}

}  // namespace conveyor
