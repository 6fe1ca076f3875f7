// The summary of one simulated program, as text for a terminal and as JSON.
#ifndef CONVEYOR_CLI_PLAN_REPORT_H_
#define CONVEYOR_CLI_PLAN_REPORT_H_

#include <nlohmann/json.hpp>
#include <string>

#include "conveyor/schedule/program.h"
#include "conveyor/sim/simulator.h"

namespace conveyor {

struct PlanReport {
  std::string schedule;  // a schedule name, or the file a program came from
  const Program* program;
  const SimResult* sim;
  std::string costs;  // CostFlags::Describe()
};

// Keys: schedule, pp, stages, chunks, microbatches, makespan, steady_state_period,
// bubble_fraction, peak_activations (per rank), busy, idle, p2p_messages, p2p_bytes.
nlohmann::json ReportJson(const PlanReport& report);

// A few aligned "name  value" lines.
std::string ReportText(const PlanReport& report);

// Largest per-rank value (0 when empty).
double MaxOf(const std::vector<double>& values);

// A number as the report prints it: "%.6g".
std::string ReportNumber(double value);
// Numbers as ReportNumber prints them, separated by single spaces.
std::string ReportList(const std::vector<double>& values);

}  // namespace conveyor

#endif  // CONVEYOR_CLI_PLAN_REPORT_H_
