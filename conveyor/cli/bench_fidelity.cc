#include "conveyor/cli/bench_fidelity.h"

#include <cstdio>
#include <memory>

#include "conveyor/cli/bench_synthetic.h"
#include "conveyor/comm/hop_latency.h"
#include "conveyor/sim/simulator.h"

namespace conveyor {
namespace {

// The measured row of one schedule with the simulator's makespans for the same program:
// uniform stage costs F, I, W, without and with `hop_s` on every message between ranks.
nlohmann::json FidelityRow(Transport& transport, const SyntheticBenchFlags& flags,
                           const std::string& name, double hop_s) {
  const SyntheticMeasurement m = MeasureSynthetic(transport, flags, name, /*traced=*/false);
  nlohmann::json row = m.row;
  if (m.skipped()) return row;
  CostModel model;
  model.uniform = StageCost{flags.f, flags.i, flags.w};
  const double compute_only = Simulate(m.program, model, SimOptions{1}).makespan;
  model.comm_latency = hop_s;
  const double predicted = Simulate(m.program, model, SimOptions{1}).makespan;
  row["hop_s"] = hop_s;
  row["predicted_no_comm_s"] = compute_only;
  row["predicted_s"] = predicted;
  row["error"] = m.measured_s / predicted - 1;
  row["error_no_comm"] = m.measured_s / compute_only - 1;
  return row;
}

std::string FidelityTable(const nlohmann::json& rows) {
  return BenchTable(
      rows,
      Printf("%-17s %12s %12s %8s %14s %8s\n", "schedule", "predicted s", "measured s", "error",
             "no-comm pred.", "error"),
      [](const nlohmann::json& row) {
        const std::string name = row["schedule"];
        return Printf("%-17s %12.4f %12.4f %+7.1f%% %14.4f %+7.1f%%\n", name.c_str(),
                      row["predicted_s"].get<double>(), row["measured_s"].get<double>(),
                      100 * row["error"].get<double>(), row["predicted_no_comm_s"].get<double>(),
                      100 * row["error_no_comm"].get<double>());
      });
}

}  // namespace

void AddBenchFidelity(CLI::App& bench, const std::vector<std::string>& args, int* exit_code) {
  auto flags = std::make_shared<SyntheticBenchFlags>();
  CLI::App* cmd = bench.add_subcommand(
      "fidelity", "measured step time vs the simulator's, with stages that sleep F, I, W");
  RegisterSyntheticBenchFlags(cmd, *flags, /*stage_costs=*/true);
  cmd->callback([flags, args, exit_code] {
    *exit_code = RunSyntheticBench(
        *flags, args,
        [&](Transport& transport, const std::vector<std::string>& names) {
          // A micro-batch here is one sample of one token: the stages send one float.
          const double hop_s = MeasureHopLatency(transport, 4, 50);
          if (transport.rank() == 0) {
            std::fprintf(stderr, "bench fidelity: one hop takes %.1f us here (median of 50)\n",
                         1e6 * hop_s);
          }
          nlohmann::json rows = nlohmann::json::array();
          for (const std::string& name : names) {
            rows.push_back(FidelityRow(transport, *flags, name, hop_s));
          }
          return rows;
        },
        FidelityTable);
  });
}

}  // namespace conveyor
