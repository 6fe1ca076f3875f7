#include "conveyor/cli/compare_command.h"

#include <cstdint>
#include <cstdio>
#include <memory>

#include "conveyor/cli/cost_flags.h"
#include "conveyor/cli/output.h"
#include "conveyor/cli/plan_report.h"
#include "conveyor/common/error.h"
#include "conveyor/common/text.h"
#include "conveyor/schedule/pipeline_limits.h"
#include "conveyor/schedule/registry.h"
#include "conveyor/schedule/verify.h"
#include "conveyor/sim/simulator.h"

namespace conveyor {
namespace {

struct CompareFlags {
  int64_t pp = 4;  // 64 bits: a value too large for an int is refused by name, not wrapped
  int64_t microbatches = 8;
  int64_t chunks = 0;
  std::string format = "text";
  std::string out;
  CostFlags costs;
};

// Peak activation of a rank in units of one rank's share of the model (1/p of it) for one
// micro-batch, so schedules with different stage sizes compare.
double PeakInRankUnits(const Program& program, const SimResult& sim) {
  const Layout& layout = program.layout;
  return MaxOf(sim.peak_activations) * layout.num_ranks() / layout.pipeline_length();
}

// The costs of one stage of `program` when `costs` are those of 1/p of the model: a rank
// with v chunks runs stages of 1/(p v) of the model, each v times cheaper.
CostModel PerStage(const CostModel& costs, const Program& program) {
  const double scale =
      static_cast<double>(program.layout.num_ranks()) / program.layout.pipeline_length();
  CostModel scaled = costs;
  StageCost& c = scaled.uniform;
  c.f *= scale;
  c.i *= scale;
  c.w *= scale;
  if (c.b >= 0) c.b *= scale;
  if (c.overlap >= 0) c.overlap *= scale;
  return scaled;
}

void RunCompare(const CompareFlags& flags) {
  const ScheduleOptions options = CheckScheduleOptions(flags.pp, flags.microbatches, flags.chunks);
  const CostModel costs = flags.costs.ToCostModel();
  nlohmann::json rows = nlohmann::json::array();
  std::string text;
  char line[256];
  std::snprintf(line, sizeof line, "%-17s %6s %9s %9s %7s %9s %7s %9s\n", "schedule", "chunks",
                "makespan", "period", "bubble", "peak act", "params", "p2p msgs");
  text += line;
  for (const ScheduleInfo& info : AllSchedules()) {
    const ScheduleOptions mine{options.pp, options.microbatches,
                               info.takes_chunks ? options.chunks : 0};
    try {
      CheckPipelineSize(info.name, mine);
      const Program program = BuildSchedule(info.name, mine);
      VerifyOrThrow(program);
      const SimResult sim = Simulate(program, PerStage(costs, program));
      const PlanReport report{std::string(info.name), &program, &sim, flags.costs.Describe()};
      nlohmann::json row = ReportJson(report);
      row["peak_activations_rank_units"] = PeakInRankUnits(program, sim);
      row["params_per_rank"] = program.layout.directions();
      rows.push_back(row);
      std::snprintf(line, sizeof line, "%-17s %6d %9.6g %9.6g %6.1f%% %9.3g %6dx %9lld\n",
                    std::string(info.name).c_str(), program.layout.chunks_per_rank(), sim.makespan,
                    sim.steady_state_period, 100 * sim.bubble_fraction,
                    PeakInRankUnits(program, sim), program.layout.directions(),
                    static_cast<long long>(sim.p2p_messages));
      text += line;
    } catch (const UserError& e) {
      rows.push_back({{"schedule", info.name}, {"error", e.what()}});
      text += PadColumn(info.name, 17) + "n/a: " + e.what() + "\n";
    }
  }
  if (flags.format == "json") {
    WriteOutput(flags.out, rows.dump(2) + "\n");
    return;
  }
  text += "\n" + std::to_string(flags.pp) + " ranks, " + std::to_string(flags.microbatches) +
          " micro-batches, costs " + flags.costs.Describe() + " for 1/" + std::to_string(flags.pp) +
          " of the model (a stage of v chunks per rank costs 1/v of that).\n"
          "period: per step when steps run back to back with no global sync.\n"
          "peak act: most activations one rank holds, in units of one micro-batch through 1/" +
          std::to_string(flags.pp) + " of the model.\n";
  WriteOutput(flags.out, text);
}

}  // namespace

void AddCompareCommand(CLI::App& app) {
  auto flags = std::make_shared<CompareFlags>();
  CLI::App* cmd =
      app.add_subcommand("compare", "simulate every schedule on the same pipeline and costs");
  cmd->add_option("--pp,-p", flags->pp, "pipeline ranks")->capture_default_str();
  cmd->add_option("--microbatches,-m", flags->microbatches, "micro-batches per step")
      ->capture_default_str();
  cmd->add_option("--chunks,-v", flags->chunks,
                  "stages per rank for the schedules that take it (0 = default)");
  cmd->add_option("--format", flags->format, "text or json")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  cmd->add_option("--out,-o", flags->out, "write to this file instead of stdout");
  flags->costs.Register(*cmd);
  cmd->callback([flags] { RunCompare(*flags); });
}

}  // namespace conveyor
