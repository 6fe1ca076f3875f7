#include "conveyor/cli/plan_report.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

namespace conveyor {
namespace {

std::string Number(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.6g", value);
  return buffer;
}

std::string List(const std::vector<double>& values) {
  std::string text;
  for (double v : values) text += (text.empty() ? "" : " ") + Number(v);
  return text;
}

}  // namespace

double MaxOf(const std::vector<double>& values) {
  return values.empty() ? 0 : *std::max_element(values.begin(), values.end());
}

nlohmann::json ReportJson(const PlanReport& report) {
  const Layout& layout = report.program->layout;
  const SimResult& sim = *report.sim;
  return {
      {"schedule", report.schedule},
      {"pp", layout.num_ranks()},
      {"stages", layout.num_stages()},
      {"chunks", layout.chunks_per_rank()},
      {"microbatches", layout.num_microbatches()},
      {"costs", report.costs},
      {"makespan", sim.makespan},
      {"steady_state_period", sim.steady_state_period},
      {"bubble_fraction", sim.bubble_fraction},
      {"peak_activations", sim.peak_activations},
      {"busy", sim.busy},
      {"idle", sim.idle},
      {"p2p_messages", sim.p2p_messages},
      {"p2p_bytes", sim.p2p_bytes},
  };
}

std::string ReportText(const PlanReport& report) {
  const SimResult& sim = *report.sim;
  char bubble[32];
  std::snprintf(bubble, sizeof bubble, "%.1f%%", 100 * sim.bubble_fraction);
  std::ostringstream out;
  out << "schedule            " << report.schedule << "\n"
      << "layout              " << report.program->layout.Describe() << "\n"
      << "costs               " << report.costs << "\n"
      << "makespan            " << Number(sim.makespan) << "\n"
      << "steady-state period " << Number(sim.steady_state_period)
      << "  (per step, steps back to back)\n"
      << "bubble              " << bubble << "\n"
      << "peak activations    " << List(sim.peak_activations)
      << "  (per rank, stage x micro-batch units)\n"
      << "p2p                 " << sim.p2p_messages << " messages, " << Number(sim.p2p_bytes)
      << " bytes\n";
  return out.str();
}

}  // namespace conveyor
