#include "conveyor/train/rank_metrics.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <iterator>

#include "conveyor/schedule/verify.h"
#include "conveyor/train/sum_over_ranks.h"
#include "conveyor/train/trainer.h"

namespace conveyor {
namespace {

// The fields of RankMetrics a rank measures itself (RankTotals::Means), in the order they
// travel in its row of the gathered table.
constexpr double RankMetrics::*kMeasuredFields[] = {&RankMetrics::step_s,
                                                    &RankMetrics::compute_s,
                                                    &RankMetrics::comm_wait_s,
                                                    &RankMetrics::transfer_wait_s,
                                                    &RankMetrics::dependency_wait_s,
                                                    &RankMetrics::post_s,
                                                    &RankMetrics::idle_s,
                                                    &RankMetrics::bubble_fraction,
                                                    &RankMetrics::comm_overlap,
                                                    &RankMetrics::sent_bytes,
                                                    &RankMetrics::peak_activation_bytes};
constexpr int kFields = static_cast<int>(std::size(kMeasuredFields));

}  // namespace

std::vector<RankMetrics> GatherRankMetrics(const Trainer& trainer) {
  const Program& program = trainer.program();
  const int p = program.layout.num_ranks();
  const RankMetrics mine = trainer.totals().Means(trainer.pipeline_rank());
  // This rank's measured fields, then the bytes a forward leaves allocated per stage (zero
  // for other ranks' stages).
  std::vector<double> row(kFields + program.layout.num_stages(), 0.0);
  for (int k = 0; k < kFields; ++k) row[k] = mine.*kMeasuredFields[k];
  for (const auto& [stage, bytes] : trainer.recorder().ForwardBytes()) row[kFields + stage] = bytes;
  const at::Tensor rows =  // (p, kFields + stages)
      GatherOverRanks(trainer.pipeline_group(), at::tensor(row, at::kDouble)).contiguous();
  // A stage's forward bytes come from the one rank that holds it.
  const at::Tensor stage_bytes = rows.sum(0).slice(0, kFields).contiguous();
  const std::vector<double> forward_bytes(stage_bytes.data_ptr<double>(),
                                          stage_bytes.data_ptr<double>() + stage_bytes.numel());
  // Counted from F until B or W, like the simulator's default.
  const std::vector<double> peaks = PeakActivations(program, 1, 1);
  const std::vector<double> peak_bytes = PeakActivations(program, forward_bytes, 1);
  std::vector<RankMetrics> ranks(p);
  for (int r = 0; r < p; ++r) {
    const double* cells = rows[r].data_ptr<double>();
    RankMetrics& m = ranks[r];
    m.rank = r;
    for (int k = 0; k < kFields; ++k) m.*kMeasuredFields[k] = cells[k];
    m.predicted_peak_microbatches = peaks[r];
    m.predicted_peak_activation_bytes = peak_bytes[r];
  }
  return ranks;
}

double MeasuredBubble(const std::vector<RankMetrics>& ranks, double pipeline_s) {
  double compute = 0;
  for (const RankMetrics& r : ranks) compute += r.compute_s;
  const double capacity = static_cast<double>(ranks.size()) * pipeline_s;
  return capacity > 0 ? std::max(0.0, 1 - compute / capacity) : 0;
}

double ExposedCommFraction(const std::vector<RankMetrics>& ranks) {
  double transfer = 0, step = 0;
  for (const RankMetrics& r : ranks) transfer += r.transfer_wait_s, step += r.step_s;
  return step > 0 ? transfer / step : 0;
}

}  // namespace conveyor
