// What one rank measured over a run's steps, summed: the executor's step statistics, the
// communication breakdown, each of its stages' compute seconds per op (F, B, I, W), the
// pipeline's makespan and the peak of bytes allocated during a step.
//
// The first step a process runs warms up allocators and connections: its sums are dropped
// when a second step is added, so the means cover the steps after the first (the first alone
// while it is the only one). The peak covers every step.
//
// Not thread-safe; one per rank (the trainer adds each step it runs).
#ifndef CONVEYOR_TRAIN_RANK_MEASUREMENTS_H_
#define CONVEYOR_TRAIN_RANK_MEASUREMENTS_H_

#include <algorithm>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "conveyor/profile/comm_breakdown.h"
#include "conveyor/runtime/executor.h"
#include "conveyor/schedule/action.h"
#include "conveyor/timeline/timeline.h"
#include "conveyor/train/rank_report.h"

namespace conveyor {

// One step's collectives of the data-, tensor- and expert-parallel axes, seconds (RankReport
// says what each covers).
struct AxisCommTimes {
  double dp_s = 0;
  double dp_exposed_s = 0;
  double tp_s = 0;
  double ep_s = 0;
};

class RankMeasurements {
 public:
  struct OpTime {
    double seconds = 0;
    int64_t count = 0;
    double work = 0;  // seconds less what sharing the cores with other ranks cost
  };

  // Adds one step of this rank: the kRun spans of `step` (its measured timeline) by stage
  // and op, the executor's `stats`, `comm`, `pipeline_s` (from the first rank's start of the
  // step's pipeline to the last rank's end) and `peak_bytes` (the most bytes allocated
  // during the step's pipeline beyond what was held when the step began) and `axes`. `work`:
  // what each kRun span of `step` held, in order (ComputeWork; empty: its duration).
  void Add(const Timeline& step, const StepStats& stats, const CommBreakdown& comm,
           double pipeline_s, int64_t peak_bytes, const AxisCommTimes& axes = {},
           const std::vector<double>& work = {});

  // The steps counted in the means (0 before the second step).
  int64_t measured_steps() const { return measured_steps_; }
  // Mean pipeline makespan per step (comparable with the simulator's makespan).
  double pipeline_s() const { return pipeline_total_s_ / Divisor(); }
  // Summed compute seconds and counts per (stage, op) of this rank's stages.
  const std::map<std::pair<int, Op>, OpTime>& op_times() const { return op_times_; }
  // This rank's means as RankReport: every field but the predicted ones (left 0), with
  // idle_s = max(0, step_s - compute_s) and bubble_fraction = idle_s / step_s (0 if no
  // time).
  RankReport Means(int rank) const;

 private:
  double Divisor() const { return static_cast<double>(std::max<int64_t>(measured_steps_, 1)); }

  std::map<std::pair<int, Op>, OpTime> op_times_;
  StepStats stats_;
  CommBreakdown comm_;
  AxisCommTimes axes_;
  double pipeline_total_s_ = 0;
  int64_t peak_bytes_ = 0;
  int64_t steps_added_ = 0;
  int64_t measured_steps_ = 0;
};

}  // namespace conveyor

#endif  // CONVEYOR_TRAIN_RANK_MEASUREMENTS_H_
