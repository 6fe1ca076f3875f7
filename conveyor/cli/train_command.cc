#include "conveyor/cli/train_command.h"

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "conveyor/cli/distributed.h"
#include "conveyor/cli/launch_flags.h"
#include "conveyor/cli/metrics_json.h"
#include "conveyor/cli/output.h"
#include "conveyor/cli/progress.h"
#include "conveyor/cli/train_flags.h"
#include "conveyor/common/error.h"
#include "conveyor/common/range_check.h"
#include "conveyor/data/byte_tokenizer.h"
#include "conveyor/timeline/chrome_trace.h"
#include "conveyor/timeline/svg_renderer.h"
#include "conveyor/train/checkpoint.h"
#include "conveyor/train/evaluate.h"
#include "conveyor/train/forward_pipeline.h"
#include "conveyor/train/generate.h"
#include "conveyor/train/measured_costs.h"
#include "conveyor/train/preflight.h"
#include "conveyor/train/rank_metrics.h"
#include "conveyor/train/tasks.h"
#include "conveyor/train/trainer.h"

namespace conveyor::cli {
namespace {

std::string Percent(double x) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f%%", 100 * x);
  return text;
}

// Every rank writes its last step's timeline; rank 0 merges them with the simulator's
// timeline of the same program under the measured costs: DIR/trace.json (Chrome / Perfetto,
// groups "measured" and "predicted", both starting at 0), DIR/measured.svg,
// DIR/predicted.svg and DIR/rank-R.json. The ranks' times share a clock origin
// (SharedClockOrigin). Needs DIR on a filesystem all ranks see. Collective.
void WriteTraces(const std::string& dir, Trainer& trainer, const Timeline& predicted,
                 Transport& transport) {
  const Timeline& mine = trainer.LastTimeline();
  std::filesystem::create_directories(dir);
  const std::string rank = std::to_string(trainer.rank());
  WriteOutput(dir + "/rank-" + rank + ".json", RenderChromeTrace(mine, "rank " + rank));
  {
    // One line per span, phase and counter sample, for rank 0 to read back.
    std::ostringstream out;
    out.precision(17);
    for (const Span& s : mine.spans) {
      out << "S " << static_cast<int>(s.kind) << " " << s.start << " " << s.end << " " << s.action
          << "\n";
    }
    for (const Phase& p : mine.phases)
      out << "P " << p.start << " " << p.end << " " << p.name << "\n";
    for (const CounterSample& c : mine.counters) {
      out << "C " << c.time << " " << c.value << " " << c.name << "\n";
    }
    WriteOutput(dir + "/rank-" + rank + ".timeline", out.str());
  }
  transport.Barrier();
  if (trainer.rank() != 0) return;
  Timeline measured;
  measured.num_ranks = mine.num_ranks;
  measured.time_unit = "s";
  for (int r = 0; r < mine.num_ranks; ++r) {
    const std::string path = dir + "/rank-" + std::to_string(r) + ".timeline";
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream fields(line.substr(2));
      if (line[0] == 'S') {
        Span s;
        int kind = 0;
        std::string action;
        fields >> kind >> s.start >> s.end >> action;
        s.rank = r;
        s.kind = static_cast<SpanKind>(kind);
        s.action = ParseAction(action);
        measured.spans.push_back(s);
      } else {
        double a = 0, b = 0;
        std::string name;
        fields >> a >> b >> std::ws;
        std::getline(fields, name);
        if (line[0] == 'P') measured.phases.push_back(Phase{r, name, a, b});
        if (line[0] == 'C') measured.counters.push_back(CounterSample{r, name, a, b});
      }
    }
    std::filesystem::remove(path);
  }
  // Both groups start at 0: the measured one at the earliest event of any rank.
  double zero = std::numeric_limits<double>::infinity();
  for (const Span& s : measured.spans) zero = std::min(zero, s.start);
  for (const CounterSample& c : measured.counters) zero = std::min(zero, c.time);
  for (Span& s : measured.spans) s.start -= zero, s.end -= zero;
  for (Phase& p : measured.phases) p.start -= zero, p.end -= zero;
  for (CounterSample& c : measured.counters) c.time -= zero;
  WriteOutput(dir + "/trace.json",
              RenderChromeTrace({{"measured", &measured}, {"predicted", &predicted}}));
  WriteOutput(dir + "/measured.svg",
              RenderSvg(measured, SvgOptions{.title = "measured, last step"}));
  WriteOutput(dir + "/predicted.svg",
              RenderSvg(predicted, SvgOptions{.title = "predicted from measured costs"}));
}

void TrainRank(const TrainConfig& config, Transport& transport) {
  const bool leader = transport.rank() == 0;
  auto task = MakeTask(config);
  Trainer trainer(config, task, &transport);
  if (!config.resume.empty()) LoadCheckpoint(config.resume, trainer, config);
  ForwardPipeline forward(trainer);
  Progress progress(config.steps, trainer.step(), leader && isatty(STDOUT_FILENO));
  if (leader) {
    std::string parts;
    for (const LayerRange& r : trainer.partition()) {
      parts += (parts.empty() ? "" : " | ") + std::to_string(r.size());
    }
    progress.Note(task->Describe());
    progress.Note("pipeline: " + config.schedule + ", " + trainer.program().layout.Describe() +
                  "; layers per stage " + parts + " (by " + config.partition + ")");
    if (trainer.step() > 0) progress.Note("resumed at step " + std::to_string(trainer.step()));
  }
  nlohmann::json steps = nlohmann::json::array(), evals = nlohmann::json::array();
  auto evaluate = [&] {
    const EvalMetrics e = Evaluate(forward);
    nlohmann::json row = {{"step", e.step}, {"loss", e.loss}};
    std::string line =
        "eval at step " + std::to_string(e.step) + ": loss " + std::to_string(e.loss);
    if (e.accuracy >= 0) {
      row["accuracy"] = e.accuracy;
      line += ", accuracy " + Percent(e.accuracy) + " (majority class " +
              Percent(task->BaselineAccuracy()) + ")";
    }
    evals.push_back(row);
    if (leader) progress.Note(line);
    return e;
  };
  double last_loss = 0, tokens_per_s = 0;
  int64_t skipped = 0;
  while (trainer.step() < config.steps) {
    const StepMetrics m = trainer.Step();
    tokens_per_s = m.tokens_per_s;
    nlohmann::json row = {{"step", m.step},       {"loss", m.loss},
                          {"lr", m.lr},           {"grad_norm", m.grad_norm},
                          {"seconds", m.seconds}, {"tokens_per_s", m.tokens_per_s}};
    if (m.skipped) {
      // JSON has no NaN: the row says which step was skipped, without its numbers.
      row = {{"step", m.step}, {"skipped", true}};
      ++skipped;
      if (leader) {
        progress.Note("step " + std::to_string(m.step) + " skipped: loss " +
                      std::to_string(m.loss) + ", gradient norm " + std::to_string(m.grad_norm));
      }
    } else {
      last_loss = m.loss;
      if (leader) progress.Step(m.step, m.loss, m.lr, m.tokens_per_s);
    }
    steps.push_back(row);
    const bool last = m.step == config.steps;
    if (config.eval_every > 0 && m.step % config.eval_every == 0 && !last) evaluate();
    if (!config.checkpoint_dir.empty() && !last && config.checkpoint_every > 0 &&
        m.step % config.checkpoint_every == 0) {
      const std::string where = SaveCheckpoint(config.checkpoint_dir, trainer, config, &transport);
      if (leader) progress.Note("checkpoint " + where);
    }
  }
  const EvalMetrics final_eval = evaluate();
  const std::vector<RankMetrics> ranks = GatherRankMetrics(trainer);
  const SimResult predicted = PredictFromMeasuredCosts(trainer);
  const double predicted_bubble = predicted.bubble_fraction;
  if (!config.trace.empty()) WriteTraces(config.trace, trainer, predicted.timeline, transport);
  if (!config.checkpoint_dir.empty()) {
    const std::string where = SaveCheckpoint(config.checkpoint_dir, trainer, config, &transport);
    if (leader) progress.Note("checkpoint " + where);
  }
  std::string sample;
  if (config.model == "gpt" && config.sample_tokens > 0) {
    sample = data::ByteTokenizer::Printable(
        Generate(forward, "", config.sample_tokens, 0.8, config.seed, config.seq_len));
  }
  progress.Finish();
  if (!leader) return;
  nlohmann::json metrics = {{"steps", steps},
                            {"evals", evals},
                            {"final_loss", last_loss},
                            {"final_eval_loss", final_eval.loss},
                            {"schedule", config.schedule},
                            {"pp", config.pp},
                            {"microbatches", config.microbatches},
                            {"model", config.model},
                            {"skipped_steps", skipped}};
  const double measured_bubble = MeasuredBubble(ranks, trainer.totals().pipeline_s());
  const double exposed_comm = ExposedCommFraction(ranks);
  metrics["ranks"] = RankRowsJson(ranks);
  metrics["measured_bubble_fraction"] = measured_bubble;
  metrics["predicted_bubble_fraction"] = predicted_bubble;
  metrics["hop_s"] = trainer.hop_s();
  metrics["pipeline_s"] = trainer.totals().pipeline_s();
  metrics["transfer_wait_fraction"] = exposed_comm;
  if (final_eval.accuracy >= 0) {
    metrics["final_accuracy"] = final_eval.accuracy;
    metrics["baseline_accuracy"] = task->BaselineAccuracy();
  }
  if (!sample.empty()) metrics["sample"] = sample;
  if (!config.metrics.empty()) WriteOutput(config.metrics, metrics.dump(2) + "\n");
  std::printf("\ndone: %lld steps, final loss %.4f, held-out loss %.4f, %.0f tokens/s\n",
              static_cast<long long>(trainer.step()), last_loss, final_eval.loss, tokens_per_s);
  if (skipped > 0) {
    std::printf("%lld step(s) skipped: non-finite loss or gradient norm\n",
                static_cast<long long>(skipped));
  }
  if (final_eval.accuracy >= 0) {
    std::printf("held-out accuracy %s (majority class %s)\n", Percent(final_eval.accuracy).c_str(),
                Percent(task->BaselineAccuracy()).c_str());
  }
  std::printf(
      "\nper rank, ms per pipeline step (steps after the first); waits split into the peer's\n"
      "compute (dependency) and messages in transit (transfer); overlap: share of transit time\n"
      "hidden behind other work; peak memory measured, and predicted by the simulator:\n");
  std::printf(
      "rank     step  compute  dependency  transfer  bubble  overlap  peak MiB  predicted\n");
  for (const RankMetrics& r : ranks) {
    std::printf("%4d %8.2f %8.2f %11.2f %9.2f %6.1f%% %7.1f%% %9.2f %6.2f (%.1f mb)\n", r.rank,
                1e3 * r.step_s, 1e3 * r.compute_s, 1e3 * r.dependency_wait_s,
                1e3 * r.transfer_wait_s, 100 * r.bubble_fraction, 100 * r.comm_overlap,
                r.peak_activation_bytes / (1 << 20), r.predicted_peak_activation_bytes / (1 << 20),
                r.predicted_peak_microbatches);
  }
  std::printf(
      "bubble: measured %s, predicted by the simulator from measured costs %s (one hop "
      "%.0f us); exposed communication %s of the step\n",
      Percent(measured_bubble).c_str(), Percent(predicted_bubble).c_str(), 1e6 * trainer.hop_s(),
      Percent(exposed_comm).c_str());
  if (!config.trace.empty())
    std::printf("traces: %s/trace.json, measured.svg\n", config.trace.c_str());
  if (!sample.empty()) std::printf("\nsample:\n%s\n", sample.c_str());
  std::fflush(stdout);
}

}  // namespace

void AddTrainCommand(CLI::App& app, const std::vector<std::string>& args, int* exit_code) {
  auto flags = std::make_shared<TrainFlags>();
  CLI::App* cmd = app.add_subcommand("train", "train a model across pipeline ranks");
  RegisterTrainFlags(cmd, *flags);
  cmd->callback([flags, args, exit_code] {
    const TrainConfig config = ResolveTrainConfig(*flags);
    flags->launch.CheckLocalRanks(config.pp, "--pp");
    PreflightCheck(config);
    PreflightFiles(config);
    RanksOptions options;
    options.nproc = config.pp;
    options.timeout = std::chrono::seconds(config.timeout_s);
    options.threads = config.threads;
    options.output = LaunchOptions::Output::kRank0Direct;
    *exit_code =
        RunAsRanks(args, options, [&](Transport& transport) { TrainRank(config, transport); });
  });
}

void AddGenerateCommand(CLI::App& app, const std::vector<std::string>& args, int* exit_code) {
  // Numbers as 64 bits: a value too large for an int is refused by name, not wrapped.
  struct GenerateFlags {
    std::string checkpoint;
    std::string prompt;
    int64_t tokens = 200;
    double temperature = 0.8;
    int64_t pp = 1;
    int64_t seed = 1;
    LaunchFlags launch;
  };
  auto flags = std::make_shared<GenerateFlags>();
  CLI::App* cmd = app.add_subcommand("generate", "sample text from a trained GPT checkpoint");
  cmd->add_option("--checkpoint", flags->checkpoint, "a checkpoint folder (or its parent)")
      ->required();
  cmd->add_option("--prompt", flags->prompt, "text to continue");
  cmd->add_option("--tokens", flags->tokens, "bytes to generate, up to 1048576")
      ->capture_default_str();
  cmd->add_option("--temperature", flags->temperature, "0 = greedy, else within [0.001, 100]")
      ->capture_default_str();
  cmd->add_option("--pp", flags->pp, "pipeline ranks, at most the model's layers + 2")
      ->capture_default_str();
  cmd->add_option("--seed", flags->seed, "sampling seed")->capture_default_str();
  flags->launch.Register(cmd);
  cmd->callback([flags, args, exit_code] {
    CheckInRange("--tokens", flags->tokens, 0, 1 << 20);
    // Below 0.001 the scaled logits overflow a float; NaN fails every comparison.
    const double t = flags->temperature;
    CONVEYOR_CHECK(t == 0 || (t >= 1e-3 && t <= 100))
        << "--temperature must be 0 (greedy) or within [0.001, 100], got " << t;
    CheckInRange("--seed", flags->seed, 0, std::numeric_limits<int64_t>::max());
    TrainConfig config = CheckpointConfig(flags->checkpoint);
    CONVEYOR_CHECK(config.model == "gpt") << "generate needs a GPT checkpoint, '"
                                          << flags->checkpoint << "' holds a " << config.model;
    SetIntegerSetting(config, "pp", flags->pp, "--pp");
    config.schedule = "gpipe";
    config.chunks = 0;
    config.microbatches = 1;
    config.batch_size = 1;
    // Generation writes nothing of the run that trained the checkpoint.
    config.metrics.clear();
    config.trace.clear();
    config.checkpoint_dir.clear();
    config.resume.clear();
    flags->launch.CheckLocalRanks(config.pp, "--pp");
    PreflightCheck(config);  // among others: no more stages than the model has layers
    PreflightFiles(config);
    RanksOptions options;
    options.nproc = config.pp;
    options.output = LaunchOptions::Output::kRank0Direct;
    *exit_code = RunAsRanks(args, options, [&](Transport& transport) {
      Trainer trainer(config, MakeTask(config), &transport);
      LoadCheckpoint(flags->checkpoint, trainer, config);
      ForwardPipeline forward(trainer);
      const std::string text =
          Generate(forward, flags->prompt, static_cast<int>(flags->tokens), flags->temperature,
                   static_cast<uint64_t>(flags->seed), config.seq_len);
      if (transport.rank() == 0) {
        std::printf("%s%s\n", flags->prompt.c_str(), data::ByteTokenizer::Printable(text).c_str());
      }
    });
  });
}

}  // namespace conveyor::cli
