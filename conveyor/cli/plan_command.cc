#include "conveyor/cli/plan_command.h"

#include <chrono>
#include <cstdint>
#include <iostream>
#include <memory>

#include "conveyor/cli/auto_plan.h"
#include "conveyor/cli/cost_flags.h"
#include "conveyor/cli/mesh_flags.h"
#include "conveyor/cli/mesh_report.h"
#include "conveyor/cli/output.h"
#include "conveyor/cli/plan_report.h"
#include "conveyor/common/error.h"
#include "conveyor/common/range_check.h"
#include "conveyor/schedule/lower.h"
#include "conveyor/schedule/pipeline_limits.h"
#include "conveyor/schedule/program_csv.h"
#include "conveyor/schedule/registry.h"
#include "conveyor/schedule/verify.h"
#include "conveyor/sim/mesh_costs.h"
#include "conveyor/sim/simulator.h"
#include "conveyor/timeline/ascii_renderer.h"
#include "conveyor/timeline/chrome_trace.h"
#include "conveyor/timeline/svg_renderer.h"

namespace conveyor {
namespace {

// Numbers as 64 bits: a value too large for an int is refused by name, not wrapped.
struct PlanFlags {
  std::string schedule = "1f1b";
  int64_t pp = 4;
  int64_t microbatches = 8;
  int64_t chunks = 0;
  std::string load;
  std::string naming = "auto";
  std::string format = "text";
  bool with_comms = false;
  std::string out;
  int64_t width = 0;
  int64_t max_in_flight = 0;
  CostFlags costs;
  MeshFlags mesh;
  AutoPlanFlags auto_plan;
};

void RunAutoPlan(const PlanFlags& flags) {
  CONVEYOR_CHECK(flags.format == "text" || flags.format == "json")
      << "--auto writes text or json, not --format " << flags.format;
  const AutoPlanRequest request = flags.auto_plan.ToRequest(flags.mesh, flags.pp);
  const auto start = std::chrono::steady_clock::now();
  const AutoPlan plan = PlanAuto(request);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CONVEYOR_CHECK(!plan.best.empty()) << NoLayoutFits(request, plan);
  WriteOutput(flags.out, flags.format == "json" ? AutoPlanJson(request, plan, seconds)
                                                : AutoPlanText(request, plan, seconds));
}

void RunPlan(const PlanFlags& flags) {
  if (flags.auto_plan.on) return RunAutoPlan(flags);
  CheckInRange("--width", flags.width, 0, 10000);
  // A rank holds at most every micro-batch of each of its stages.
  CheckInRange("--max-in-flight", flags.max_in_flight, 0, int64_t{kMaxChunks} * kMaxMicrobatches);
  const CostModel costs = flags.costs.ToCostModel();
  std::string name = flags.schedule;
  std::unique_ptr<Program> program;
  if (!flags.load.empty()) {
    LoadedProgram loaded = LoadProgramCsv(flags.load, ParseNamingChoice(flags.naming));
    for (const std::string& note : loaded.notes) std::cerr << "conveyor: " << note << "\n";
    program = std::make_unique<Program>(std::move(loaded.program));
    name = flags.load;
  } else {
    const ScheduleOptions options =
        CheckScheduleOptions(flags.pp, flags.microbatches, flags.chunks);
    CheckPipelineSize(flags.schedule, options);
    program = std::make_unique<Program>(BuildSchedule(flags.schedule, options));
  }
  VerifyOrThrow(*program, VerifyOptions{static_cast<int>(flags.max_in_flight)});
  const Mesh mesh = flags.mesh.ToMesh(program->layout.num_ranks());
  const MeshNetwork network = flags.mesh.ToNetwork(mesh);
  const Program lowered = Lower(*program);
  const ModelShape shape = flags.mesh.ToShape();
  const MeshSimResult mesh_sim = SimulateMesh(*program, costs, mesh, network, shape);
  const SimResult& sim = mesh_sim.pipeline;
  const PlanReport report{name, program.get(), &sim, flags.costs.Describe()};
  const MeshReport mesh_report{&mesh, &network, &program->layout, &shape, &mesh_sim};
  const Program& shown = flags.with_comms ? lowered : *program;

  std::string text;
  if (flags.format == "text") {
    text = ReportText(report);
    if (flags.mesh.shown()) text += MeshText(mesh_report);
    text += "\n" + RenderAscii(sim.timeline, flags.width);
    if (flags.with_comms) text += "\n" + shown.ToText();
  } else if (flags.format == "json") {
    nlohmann::json json = ReportJson(report);
    if (flags.mesh.shown()) json["mesh"] = MeshJson(mesh_report);
    if (flags.with_comms) json["program"] = shown.ToText();
    text = json.dump(2) + "\n";
  } else if (flags.format == "csv") {
    text = ProgramToCsv(shown);
  } else if (flags.format == "svg") {
    text = RenderSvg(sim.timeline, SvgOptions{.title = name + ", " + program->layout.Describe()});
  } else {
    text = RenderChromeTrace({{"predicted: " + name, &sim.timeline}});
  }
  if (flags.format != "text" && flags.format != "json") {
    // The formats that have no room for it: the advice goes to stderr.
    const MeshAdvice advice = AdviseMesh(mesh, network);
    for (const std::string& w : advice.warnings) std::cerr << "conveyor: warning: " << w << "\n";
    for (const std::string& n : advice.notes) std::cerr << "conveyor: note: " << n << "\n";
  }
  WriteOutput(flags.out, text);
}

}  // namespace

void AddPlanCommand(CLI::App& app) {
  auto flags = std::make_shared<PlanFlags>();
  CLI::App* cmd =
      app.add_subcommand("plan", "build (or load), verify, lower, simulate and draw one schedule");
  cmd->add_option("--schedule,-s", flags->schedule, "schedule name: " + ScheduleNames())
      ->capture_default_str();
  cmd->add_option("--pp,-p", flags->pp, "pipeline ranks")->capture_default_str();
  cmd->add_option("--microbatches,-m", flags->microbatches, "micro-batches per step")
      ->capture_default_str();
  cmd->add_option("--chunks,-v", flags->chunks, "stages per rank (0 = the schedule's default)");
  cmd->add_option("--load", flags->load, "a program in PyTorch's CSV layout, instead of --schedule")
      ->check(CLI::ExistingFile);
  cmd->add_option("--naming", flags->naming, "naming of a loaded CSV: auto, current or legacy")
      ->check(CLI::IsMember({"auto", "current", "legacy"}))
      ->capture_default_str();
  cmd->add_option("--format", flags->format, "text, json, csv, svg or chrome")
      ->check(CLI::IsMember({"text", "json", "csv", "svg", "chrome"}))
      ->capture_default_str();
  cmd->add_flag("--with-comms", flags->with_comms, "show the program with SEND/RECV inserted");
  cmd->add_option("--out,-o", flags->out, "write to this file instead of stdout");
  cmd->add_option("--width", flags->width, "columns of the text timeline, up to 10000 (0 = auto)");
  cmd->add_option("--max-in-flight", flags->max_in_flight,
                  "fail when a rank holds more micro-batch activations (0 = no bound)");
  flags->costs.Register(*cmd);
  flags->mesh.Register(*cmd);
  flags->auto_plan.Register(*cmd);
  cmd->callback([flags] { RunPlan(*flags); });
}

}  // namespace conveyor
