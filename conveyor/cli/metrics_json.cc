#include "conveyor/cli/metrics_json.h"

#include <algorithm>
#include <string>

namespace conveyor {
namespace {

// {"process_s": ..., "rendezvous_s": ..., ..., "first_step_s": ..., "total_s": ...}.
nlohmann::json StartupJson(const StartupBreakdown& startup) {
  nlohmann::json phases = nlohmann::json::object();
  for (const StartupPhase& phase : kStartupPhases) {
    std::string key = std::string(phase.name) + "_s";
    std::replace(key.begin(), key.end(), ' ', '_');
    phases[key] = startup.*phase.field;
  }
  phases["total_s"] = startup.total_s();
  return phases;
}

}  // namespace

nlohmann::json RankRowsJson(const std::vector<RankReport>& ranks) {
  nlohmann::json rows = nlohmann::json::array();
  for (const RankReport& r : ranks) {
    rows.push_back({{"rank", r.rank},
                    {"dp", r.coords.dp},
                    {"tp", r.coords.tp},
                    {"cp", r.coords.cp},
                    {"pp", r.coords.pp},
                    {"step_s", r.step_s},
                    {"compute_s", r.compute_s},
                    {"work_s", r.work_s},
                    {"comm_wait_s", r.comm_wait_s},
                    {"transfer_wait_s", r.transfer_wait_s},
                    {"dependency_wait_s", r.dependency_wait_s},
                    {"post_s", r.post_s},
                    {"idle_s", r.idle_s},
                    {"bubble_fraction", r.bubble_fraction},
                    {"comm_overlap", r.comm_overlap},
                    {"sent_bytes", r.sent_bytes},
                    {"peak_activation_bytes", r.peak_activation_bytes},
                    {"predicted_peak_microbatches", r.predicted_peak_microbatches},
                    {"predicted_peak_activation_bytes", r.predicted_peak_activation_bytes},
                    {"dp_comm_s", r.dp_comm_s},
                    {"dp_exposed_s", r.dp_exposed_s},
                    {"dp_hidden_fraction", r.dp_hidden_fraction()},
                    {"tp_comm_s", r.tp_comm_s},
                    {"ep_comm_s", r.ep_comm_s},
                    {"device_peak_allocated_bytes", r.device_peak_allocated_bytes},
                    {"device_peak_reserved_bytes", r.device_peak_reserved_bytes},
                    {"peak_tensor_bytes", r.peak_tensor_bytes},
                    {"peak_resident_bytes", r.peak_resident_bytes},
                    {"startup_s", r.startup_s},
                    {"stage_build_s", r.stage_build_s},
                    {"startup", StartupJson(r.startup)}});
  }
  return rows;
}

}  // namespace conveyor
