#include "conveyor/train/rank_report.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <iterator>

#include "conveyor/profile/memory_tracker.h"
#include "conveyor/schedule/activation_memory.h"
#include "conveyor/train/world_collectives.h"

namespace conveyor {
namespace {

// The fields of RankReport a rank measures itself (RankMeasurements::Means), in the order they
// travel in its row of the gathered table.
constexpr double RankReport::*kMeasuredFields[] = {&RankReport::step_s,
                                                   &RankReport::compute_s,
                                                   &RankReport::work_s,
                                                   &RankReport::comm_wait_s,
                                                   &RankReport::transfer_wait_s,
                                                   &RankReport::dependency_wait_s,
                                                   &RankReport::post_s,
                                                   &RankReport::idle_s,
                                                   &RankReport::bubble_fraction,
                                                   &RankReport::comm_overlap,
                                                   &RankReport::sent_bytes,
                                                   &RankReport::peak_activation_bytes,
                                                   &RankReport::dp_comm_s,
                                                   &RankReport::dp_exposed_s,
                                                   &RankReport::tp_comm_s,
                                                   &RankReport::ep_comm_s,
                                                   &RankReport::device_peak_allocated_bytes,
                                                   &RankReport::device_peak_reserved_bytes,
                                                   &RankReport::peak_tensor_bytes,
                                                   &RankReport::peak_resident_bytes,
                                                   &RankReport::startup_s,
                                                   &RankReport::stage_build_s};
constexpr int kFields = static_cast<int>(std::size(kMeasuredFields));
constexpr int kPhases = static_cast<int>(std::size(kStartupPhases));

}  // namespace

std::vector<RankReport> GatherRankReports(const PipelineModel& model, RankReport mine,
                                          const StepRecorder& recorder) {
  const Program& program = model.program();
  const int stages = program.layout.num_stages();
  const DeviceMemory device = recorder.device_memory();
  mine.device_peak_allocated_bytes = static_cast<double>(device.peak_allocated_bytes);
  mine.device_peak_reserved_bytes = static_cast<double>(device.peak_reserved_bytes);
  mine.peak_tensor_bytes = static_cast<double>(device.has_counts ? device.peak_allocated_bytes
                                                                 : MemoryTracker::max_bytes());
  // This rank's measured fields, then the bytes a forward leaves allocated per stage (zero
  // for other ranks' stages).
  std::vector<double> row(kFields + kPhases + stages, 0.0);
  for (int k = 0; k < kFields; ++k) row[k] = mine.*kMeasuredFields[k];
  for (int k = 0; k < kPhases; ++k) row[kFields + k] = mine.startup.*kStartupPhases[k].field;
  for (const auto& [stage, bytes] : recorder.ForwardBytes()) {
    row[kFields + kPhases + stage] = bytes;
  }
  const at::Tensor rows =  // (world, kFields + kPhases + stages)
      GatherOverRanks(model.world(), at::tensor(row, at::kDouble)).contiguous();
  const Mesh& mesh = model.mesh();
  // Counted from F until B or W, like the simulator's default.
  const std::vector<double> peaks = PeakActivations(program, 1, 1);
  std::vector<RankReport> ranks(rows.size(0));
  for (int r = 0; r < static_cast<int>(ranks.size()); ++r) {
    const double* cells = rows[r].data_ptr<double>();
    RankReport& m = ranks[r];
    m.rank = r;
    m.coords = mesh.coords(r);
    for (int k = 0; k < kFields; ++k) m.*kMeasuredFields[k] = cells[k];
    for (int k = 0; k < kPhases; ++k) m.startup.*kStartupPhases[k].field = cells[kFields + k];
    // A stage's forward bytes come from the one rank of this rank's pipeline that holds it.
    std::vector<double> forward_bytes(stages, 0.0);
    for (int p = 0; p < mesh.pp(); ++p) {
      MeshCoords peer = m.coords;
      peer.pp = p;
      const double* peer_cells = rows[mesh.rank_of(peer)].data_ptr<double>();
      for (int s = 0; s < stages; ++s) forward_bytes[s] += peer_cells[kFields + kPhases + s];
    }
    m.predicted_peak_microbatches = peaks[m.coords.pp];
    m.predicted_peak_activation_bytes = PeakActivations(program, forward_bytes, 1)[m.coords.pp];
  }
  return ranks;
}

double RankReport::dp_hidden_fraction() const {
  return dp_comm_s > 0 ? std::clamp(1 - dp_exposed_s / dp_comm_s, 0.0, 1.0) : 1;
}

double MeasuredBubble(const std::vector<RankReport>& ranks, double pipeline_s, double room) {
  double compute = 0;
  for (const RankReport& r : ranks) compute += r.work_s;
  const double capacity = static_cast<double>(ranks.size()) * room * pipeline_s;
  return capacity > 0 ? std::max(0.0, 1 - compute / capacity) : 0;
}

double ExposedCommFraction(const std::vector<RankReport>& ranks) {
  double transfer = 0, step = 0;
  for (const RankReport& r : ranks) transfer += r.transfer_wait_s, step += r.step_s;
  return step > 0 ? transfer / step : 0;
}

}  // namespace conveyor
