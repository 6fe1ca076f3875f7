// `conveyor plan --auto`: the auto-planner (sim/auto_planner.h) from the command line, its
// flags and its report (a table of the best layouts, or JSON).
#ifndef CONVEYOR_CLI_AUTO_PLAN_H_
#define CONVEYOR_CLI_AUTO_PLAN_H_

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "conveyor/cli/mesh_flags.h"
#include "conveyor/sim/auto_planner.h"

namespace conveyor {

struct AutoPlanFlags {
  bool on = false;  // --auto
  int64_t world = 8;
  double memory_per_rank = 80e9;
  double device_tflops = 312;
  double efficiency = 0.5;
  std::string model = "gpt";
  int64_t layers = 24;
  int64_t heads = 16;
  int64_t kv_heads = 0;
  int64_t intermediate = 0;
  int64_t vocab = 50257;
  // A Mixture-of-Experts llama (experts > 0): every block sparse but the first
  // `moe_first_dense`.
  int64_t experts = 0;
  int64_t top_k = 2;
  int64_t expert_units = 0;
  int64_t shared_expert_units = 0;
  int64_t moe_first_dense = 0;
  int64_t ep = 0;  // > 0: only that expert-parallel size
  int64_t cp = 0;  // > 0: only that context-parallel size
  int64_t global_batch = 512;
  std::string schedules;  // comma-separated; empty: all
  int64_t top = 5;
  int64_t max_microbatches = 128;
  int64_t max_chunks = 4;
  std::string costs;     // a `conveyor profile` file: measured costs, and the model timed
  double cores = 0;      // > 0: every rank on one machine of this many cores
  bool one_gpu = false;  // every rank a thread on one GPU (costs measured there)
  // --pp, --dp, --tp when given (they then fix that axis).
  CLI::Option* fixed_pp = nullptr;
  CLI::Option* fixed_dp = nullptr;
  CLI::Option* fixed_tp = nullptr;
  CLI::Option* bucket = nullptr;  // --bucket-bytes

  // The flags beside `plan`'s; --auto excludes the ones it chooses (--schedule,
  // --microbatches, --chunks, --load, --micro-batch-size, --layers-per-stage) and reads --pp,
  // --dp and --tp as constraints.
  void Register(CLI::App& cmd);
  // The request, with the model's hidden size and sequence and the network from `mesh`, the
  // pipeline `pp` when --pp was given; the model is the --costs file's when there is one.
  // DualPipe's pairs run at once where the ranks are CPU ones (--cores, or costs measured on
  // the CPU), as conveyor's executor runs them there. UserError naming the flag and value
  // when one is out of range.
  AutoPlanRequest ToRequest(const MeshFlags& mesh, int64_t pp) const;
};

// The report of a plan with a best: text (a table, then how many layouts were tried) or
// JSON.
std::string AutoPlanText(const AutoPlanRequest& request, const AutoPlan& plan, double seconds);
std::string AutoPlanJson(const AutoPlanRequest& request, const AutoPlan& plan, double seconds);

}  // namespace conveyor

#endif  // CONVEYOR_CLI_AUTO_PLAN_H_
