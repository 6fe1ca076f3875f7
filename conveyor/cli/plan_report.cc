#include "conveyor/cli/plan_report.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

namespace conveyor {

std::string ReportNumber(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.6g", value);
  return buffer;
}

std::string ReportList(const std::vector<double>& values) {
  std::string text;
  for (double v : values) text += (text.empty() ? "" : " ") + ReportNumber(v);
  return text;
}

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
      << "makespan            " << ReportNumber(sim.makespan) << "\n"
      << "steady-state period " << ReportNumber(sim.steady_state_period)
      << "  (per step, steps back to back)\n"
      << "bubble              " << bubble << "\n"
      << "peak activations    " << ReportList(sim.peak_activations)
      << "  (per rank, stage x micro-batch units)\n"
      << "p2p                 " << sim.p2p_messages << " messages, " << ReportNumber(sim.p2p_bytes)
      << " bytes\n";
  return out.str();
}

}  // namespace conveyor
