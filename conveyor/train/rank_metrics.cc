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
                                                    &RankMetrics::peak_activation_bytes,
                                                    &RankMetrics::dp_comm_s,
                                                    &RankMetrics::dp_exposed_s,
                                                    &RankMetrics::tp_comm_s,
                                                    &RankMetrics::device_peak_allocated_bytes,
                                                    &RankMetrics::device_peak_reserved_bytes};
constexpr int kFields = static_cast<int>(std::size(kMeasuredFields));

}  // namespace

std::vector<RankMetrics> GatherRankMetrics(const Trainer& trainer) {
  const Program& program = trainer.model().program();
  const int stages = program.layout.num_stages();
  RankMetrics mine = trainer.totals().Means(trainer.model().rank());
  const DeviceMemory device = trainer.recorder().device_memory();
  mine.device_peak_allocated_bytes = static_cast<double>(device.peak_allocated_bytes);
  mine.device_peak_reserved_bytes = static_cast<double>(device.peak_reserved_bytes);
  // This rank's measured fields, then the bytes a forward leaves allocated per stage (zero
  // for other ranks' stages).
  std::vector<double> row(kFields + stages, 0.0);
  for (int k = 0; k < kFields; ++k) row[k] = mine.*kMeasuredFields[k];
  for (const auto& [stage, bytes] : trainer.recorder().ForwardBytes()) row[kFields + stage] = bytes;
  const at::Tensor rows =  // (world, kFields + stages)
      GatherOverRanks(trainer.model().world(), at::tensor(row, at::kDouble)).contiguous();
  const Mesh& mesh = trainer.model().mesh();
  // Counted from F until B or W, like the simulator's default.
  const std::vector<double> peaks = PeakActivations(program, 1, 1);
  std::vector<RankMetrics> ranks(rows.size(0));
  for (int r = 0; r < static_cast<int>(ranks.size()); ++r) {
    const double* cells = rows[r].data_ptr<double>();
    RankMetrics& m = ranks[r];
    m.rank = r;
    m.coords = mesh.coords(r);
    for (int k = 0; k < kFields; ++k) m.*kMeasuredFields[k] = cells[k];
    // A stage's forward bytes come from the one rank of this rank's pipeline that holds it.
    std::vector<double> forward_bytes(stages, 0.0);
    for (int p = 0; p < mesh.pp(); ++p) {
      MeshCoords peer = m.coords;
      peer.pp = p;
      const double* peer_cells = rows[mesh.rank_of(peer)].data_ptr<double>();
      for (int s = 0; s < stages; ++s) forward_bytes[s] += peer_cells[kFields + s];
    }
    m.predicted_peak_microbatches = peaks[m.coords.pp];
    m.predicted_peak_activation_bytes = PeakActivations(program, forward_bytes, 1)[m.coords.pp];
  }
  return ranks;
}

double RankMetrics::dp_hidden_fraction() const {
  return dp_comm_s > 0 ? std::clamp(1 - dp_exposed_s / dp_comm_s, 0.0, 1.0) : 1;
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
