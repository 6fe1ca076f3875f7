#include "conveyor/train/rank_measurements.h"

#include <algorithm>

namespace conveyor {

void RankMeasurements::Add(const Timeline& step, const StepStats& stats, const CommBreakdown& comm,
                           double pipeline_s, int64_t peak_bytes, const AxisCommTimes& axes,
                           const std::vector<double>& work) {
  peak_bytes_ = std::max(peak_bytes_, peak_bytes);
  if (++steps_added_ == 2) {  // the first step only warmed up: its sums go
    op_times_.clear();
    stats_ = StepStats{};
    comm_ = CommBreakdown{};
    axes_ = AxisCommTimes{};
    pipeline_total_s_ = 0;
  }
  if (steps_added_ >= 2) ++measured_steps_;
  pipeline_total_s_ += pipeline_s;
  size_t run = 0;
  for (const Span& s : step.spans) {
    if (s.kind != SpanKind::kRun) continue;
    OpTime& t = op_times_[{s.action.stage, s.action.op}];
    t.seconds += s.end - s.start;
    t.work += run < work.size() ? work[run] : s.end - s.start;
    ++t.count;
    ++run;
  }
  stats_.seconds += stats.seconds;
  stats_.compute_s += stats.compute_s;
  stats_.comm_wait_s += stats.comm_wait_s;
  stats_.post_s += stats.post_s;
  stats_.sent_bytes += stats.sent_bytes;
  comm_ += comm;
  axes_.dp_s += axes.dp_s;
  axes_.dp_exposed_s += axes.dp_exposed_s;
  axes_.tp_s += axes.tp_s;
  axes_.ep_s += axes.ep_s;
}

RankReport RankMeasurements::Means(int rank) const {
  const double n = Divisor();
  RankReport m;
  m.rank = rank;
  m.step_s = stats_.seconds / n;
  m.compute_s = stats_.compute_s / n;
  m.comm_wait_s = stats_.comm_wait_s / n;
  m.transfer_wait_s = comm_.transfer_wait_s / n;
  m.dependency_wait_s = comm_.dependency_wait_s / n;
  m.post_s = stats_.post_s / n;
  double seconds = 0, work = 0;
  for (const auto& [key, t] : op_times_) seconds += t.seconds, work += t.work;
  // Handing messages to the transport takes the cores as computing does.
  m.work_s = (m.compute_s + m.post_s) * (seconds > 0 ? work / seconds : 1);
  m.idle_s = std::max(0.0, m.step_s - m.compute_s);
  m.bubble_fraction = m.step_s > 0 ? m.idle_s / m.step_s : 0;
  m.comm_overlap = comm_.overlap_fraction();
  m.sent_bytes = static_cast<double>(stats_.sent_bytes) / n;
  m.peak_activation_bytes = static_cast<double>(peak_bytes_);
  m.dp_comm_s = axes_.dp_s / n;
  m.dp_exposed_s = axes_.dp_exposed_s / n;
  m.tp_comm_s = axes_.tp_s / n;
  m.ep_comm_s = axes_.ep_s / n;
  return m;
}

}  // namespace conveyor
