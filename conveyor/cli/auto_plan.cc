#include "conveyor/cli/auto_plan.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "conveyor/cli/bench_support.h"
#include "conveyor/cli/bytes_flag.h"
#include "conveyor/cli/layer_cost_json.h"
#include "conveyor/common/byte_size.h"
#include "conveyor/common/error.h"
#include "conveyor/common/range_check.h"
#include "conveyor/common/text.h"
#include "conveyor/sim/recompute.h"

namespace conveyor {
namespace {

// A long stage split cut to 14 characters: "1,10,10,...,9".
std::string Abbreviated(const std::string& sizes) {
  return sizes.size() <= 14 ? sizes : sizes.substr(0, 10) + "...";
}

}  // namespace

void AutoPlanFlags::Register(CLI::App& cmd) {
  CLI::Option* auto_flag = cmd.add_flag(
      "--auto", on,
      "choose the layout: every dp x tp x pp, schedule, micro-batch count, recomputation and "
      "ZeRO stage that fits --memory-per-rank, simulated, best first");
  cmd.add_option("--world", world, "--auto: ranks (GPUs) in all")->capture_default_str();
  cmd.add_option("--memory-per-rank", memory_per_rank,
                 "--auto: bytes each rank may hold (80GB, 512MiB or a number)")
      ->capture_default_str()
      ->transform(BytesFlag());
  cmd.add_option("--device-tflops", device_tflops, "--auto: a rank's peak TFLOP/s (A100 bf16)")
      ->capture_default_str();
  cmd.add_option("--efficiency", efficiency,
                 "--auto: the share of the peak a layer's matrix work reaches")
      ->capture_default_str();
  cmd.add_option("--model", model, "--auto: gpt (4x MLP) or llama (SwiGLU)")
      ->check(CLI::IsMember({"gpt", "llama"}))
      ->capture_default_str();
  cmd.add_option("--layers", layers, "--auto: transformer blocks")->capture_default_str();
  cmd.add_option("--heads", heads, "--auto: attention heads")->capture_default_str();
  cmd.add_option("--kv-heads", kv_heads, "--auto: key-value heads (0 = --heads)");
  cmd.add_option("--intermediate", intermediate, "--auto: MLP units (0 = the model's default)");
  cmd.add_option("--vocab", vocab, "--auto: vocabulary")->capture_default_str();
  cmd.add_option("--experts", experts,
                 "--auto: a Mixture-of-Experts llama's experts a block (0 = dense)");
  cmd.add_option("--top-k", top_k, "--auto: experts a token (with --experts)")
      ->capture_default_str();
  cmd.add_option("--expert-units", expert_units,
                 "--auto: an expert's SwiGLU units (0 = the MLP's, --intermediate)");
  cmd.add_option("--shared-expert-units", shared_expert_units,
                 "--auto: a shared expert's units beside the routed ones (0 = none)");
  cmd.add_option("--moe-first-dense", moe_first_dense,
                 "--auto: the first blocks keep a dense MLP (with --experts)");
  cmd.add_option("--ep", ep,
                 "--auto: only this expert-parallel size (0 = every one dividing dp and the "
                 "experts)");
  cmd.add_option("--cp", cp,
                 "--auto: only this context-parallel size (0 = every one dividing the world and "
                 "a llama's sequence into 2 cp chunks)");
  cmd.add_option("--global-batch", global_batch, "--auto: sequences per step, all replicas")
      ->capture_default_str();
  cmd.add_option("--schedules", schedules, "--auto: only these schedules (a,b,...)");
  cmd.add_option("--top", top, "--auto: layouts shown")->capture_default_str();
  cmd.add_option("--max-microbatches", max_microbatches, "--auto: most micro-batches tried")
      ->capture_default_str();
  cmd.add_option("--max-chunks", max_chunks,
                 "--auto: most chunks per rank tried (interleaved-1f1b, looped-bfs, "
                 "interleaved-zb)")
      ->capture_default_str();
  cmd.add_option("--costs", costs,
                 "--auto: layer costs measured by `conveyor profile` (its model; else FLOPs at "
                 "--device-tflops x --efficiency)");
  cmd.add_option("--cores", cores,
                 "--auto: the ranks share one machine of this many cores (with --costs: running "
                 "the profile's threads each, at the capacity it measured); 0 = a device each")
      ->capture_default_str();
  cmd.add_flag("--one-gpu", one_gpu,
               "--auto: the ranks are threads sharing one GPU (train --rank-threads), at the "
               "capacity `conveyor profile --device cuda --ranks N` measured")
      ->excludes("--cores");
  for (const char* chosen : {"--schedule", "--microbatches", "--chunks", "--load",
                             "--micro-batch-size", "--layers-per-stage"}) {
    if (CLI::Option* option = cmd.get_option_no_throw(chosen)) auto_flag->excludes(option);
  }
  fixed_pp = cmd.get_option_no_throw("--pp");
  fixed_dp = cmd.get_option_no_throw("--dp");
  fixed_tp = cmd.get_option_no_throw("--tp");
  bucket = cmd.get_option_no_throw("--bucket-bytes");
}

AutoPlanRequest AutoPlanFlags::ToRequest(const MeshFlags& mesh, int64_t pp) const {
  CheckInRange("--world", world, 1, kMaxMeshRanks);
  CheckPositiveUpTo("--memory-per-rank", memory_per_rank, 1e18);
  CheckPositiveUpTo("--device-tflops", device_tflops, 1e9);
  CheckPositiveUpTo("--efficiency", efficiency, 1);
  CheckInRange("--layers", layers, 1, 1 << 16);
  CheckInRange("--heads", heads, 1, 1 << 16);
  CheckInRange("--kv-heads", kv_heads, 0, heads);
  CheckInRange("--intermediate", intermediate, 0, int64_t{1} << 24);
  CheckInRange("--vocab", vocab, 1, int64_t{1} << 24);
  CheckInRange("--experts", experts, 0, 4096);
  CheckInRange("--ep", ep, 0, kMaxMeshRanks);
  CheckInRange("--cp", cp, 0, kMaxMeshRanks);
  if (experts > 0) {
    CONVEYOR_CHECK(model == "llama") << "--experts: Mixture-of-Experts blocks are llama's "
                                     << "(SwiGLU experts), not " << model << "'s";
    CheckInRange("--top-k", top_k, 1, experts);
    CheckInRange("--expert-units", expert_units, 0, int64_t{1} << 24);
    CheckInRange("--shared-expert-units", shared_expert_units, 0, int64_t{1} << 24);
    CheckInRange("--moe-first-dense", moe_first_dense, 0, layers);
  }
  CheckInRange("--global-batch", global_batch, 1, int64_t{1} << 24);
  CheckInRange("--top", top, 1, 1000);
  CheckInRange("--max-microbatches", max_microbatches, 1, 4096);
  CheckInRange("--max-chunks", max_chunks, 1, 64);
  CheckInRange("--cores", cores, 0.0, 1e6);
  const ModelShape shape = mesh.ToShape();
  AutoPlanRequest r;
  r.model = TransformerSpec{.layers = layers,
                            .hidden = shape.hidden,
                            .heads = heads,
                            .kv_heads = kv_heads,
                            .intermediate = intermediate,
                            .vocab = vocab,
                            .seq_len = shape.seq_len,
                            .gated_mlp = model == "llama"};
  if (experts > 0) {
    r.model.experts = experts;
    r.model.top_k = top_k;
    r.model.expert_units = expert_units;
    r.model.shared_units = shared_expert_units;
    for (int64_t l = 0; l < moe_first_dense; ++l) r.model.dense_blocks.push_back(l);
  }
  r.world = static_cast<int>(world);
  r.global_batch = global_batch;
  r.device_flops = device_tflops * 1e12;
  r.efficiency = efficiency;
  r.memory_per_rank = memory_per_rank;
  r.network = mesh.ToNetwork(Mesh::Make(r.world, 1, 1, r.world));
  r.schedules = SelectedSchedules(schedules);
  r.top = static_cast<int>(top);
  r.max_microbatches = static_cast<int>(max_microbatches);
  r.max_chunks = static_cast<int>(max_chunks);
  if (!costs.empty()) {
    r.measured = ReadLayerCostTable(costs);
    r.model = r.measured->model;
  }
  if (cores > 0) ShareOneCpu(r, cores);
  auto given = [](const CLI::Option* option) { return option != nullptr && option->count() > 0; };
  if (given(fixed_pp)) {
    CheckInRange("--pp", pp, 1, kMaxMeshRanks);
    r.pp = static_cast<int>(pp);
  }
  if (given(fixed_dp)) r.dp = static_cast<int>(mesh.dp);
  if (given(fixed_tp)) r.tp = static_cast<int>(mesh.tp);
  r.ep = static_cast<int>(ep);
  r.cp = static_cast<int>(cp);
  // Conveyor's context parallelism runs a Llama (SwiGLU, rotary) without experts.
  r.context_parallel = r.model.gated_mlp && r.model.experts == 0;
  CONVEYOR_CHECK(cp <= 1 || r.context_parallel)
      << "--cp " << cp << ": context parallelism runs a llama without experts";
  r.pairs_at_once = cores > 0 || (r.measured && r.measured->device == "cpu");
  // The trainer's bucket where the ranks will run, unless told.
  r.bucket_bytes = given(bucket) ? shape.bucket_bytes
                                 : static_cast<double>(DefaultBucketBytes(/*gpu=*/cores == 0));
  if (one_gpu) ShareOneGpu(r);  // after --tp, which it refuses above 1
  return r;
}

std::string AutoPlanText(const AutoPlanRequest& r, const AutoPlan& plan, double seconds) {
  const std::string nodes = r.network.ranks_per_node > 0
                                ? std::to_string(r.network.ranks_per_node) + " a node"
                                : "one node";
  const std::string costs =
      r.measured
          ? "costs measured by conveyor profile (" +
                (r.measured->device == "cpu" ? Printf("%d thread(s) a rank", r.measured->threads)
                                             : "on a GPU") +
                (r.shared_compute > 0
                     ? Printf(", the ranks sharing %s worth %.2f lone ranks",
                              r.measured->device == "cpu" ? "cores" : "it", r.shared_compute)
                     : "") +
                ")"
          : Printf("%.0f TFLOP/s peak (%.0f%% of it reached)", r.device_flops / 1e12,
                   100 * r.efficiency);
  const double params = r.model.Params();
  const bool billions = params >= 1e9;
  const TransformerSpec& m = r.model;
  const std::string experts =
      m.experts > 0 ? Printf(", %lld of them sparse (%lld experts, top %lld)",
                             static_cast<long long>(m.SparseBlocks()),
                             static_cast<long long>(m.experts), static_cast<long long>(m.top_k))
                    : "";
  std::string out = Printf(
      "auto plan: %s of %lld layers%s, hidden %lld, %.2f %s parameters, %d ranks (%s), %lld "
      "sequences of %lld a step, %s and %s a rank\n",
      m.gated_mlp ? "Llama" : "GPT", static_cast<long long>(m.layers), experts.c_str(),
      static_cast<long long>(m.hidden), params / (billions ? 1e9 : 1e6), billions ? "B" : "M",
      r.world, nodes.c_str(), static_cast<long long>(r.global_batch),
      static_cast<long long>(m.seq_len), costs.c_str(), ByteSize(r.memory_per_rank).c_str());
  // The mesh's column: wider where experts are spread ("8 x 1 x 1, ep 8").
  int mesh_width = 12;
  for (const PlanCandidate& c : plan.best) {
    mesh_width = std::max(mesh_width, static_cast<int>(MeshSizes(c).size()));
  }
  out += Printf("rank  %-*s  ", mesh_width, "dp x tp x pp") +
         "schedule          chunks  mb x size  recompute zero    step s  tokens/s "
         "  MFU  bubble  peak memory  layers a stage  held back by\n";
  for (size_t i = 0; i < plan.best.size(); ++i) {
    const PlanCandidate& c = plan.best[i];
    out += Printf(
        "%4zu  %-*s  %-16s %6d %4d x %-4lld  %-9s %4d %9.3g %9.0f %6s %6.1f%% %12s  %-14s  %s\n",
        i + 1, mesh_width, MeshSizes(c).c_str(), c.schedule.c_str(), c.chunks, c.microbatches,
        static_cast<long long>(c.micro_batch_size), std::string(RecomputeName(c.recompute)).c_str(),
        c.zero, c.step_s, c.tokens_per_s, c.mfu < 0 ? "-" : Printf("%.1f%%", 100 * c.mfu).c_str(),
        100 * std::max(0.0, c.bubble), ByteSize(c.peak_bytes).c_str(),
        Abbreviated(c.stage_layers).c_str(), i == 0 ? "(best)" : c.held_back.c_str());
  }
  out += Printf("%lld layouts; %lld candidates over the memory limit, %lld simulated, in %.2f s\n",
                static_cast<long long>(plan.layouts), static_cast<long long>(plan.over_memory),
                static_cast<long long>(plan.simulated), seconds);
  return out;
}

std::string AutoPlanJson(const AutoPlanRequest& r, const AutoPlan& plan, double seconds) {
  nlohmann::json best = nlohmann::json::array();
  for (const PlanCandidate& c : plan.best) {
    best.push_back({{"dp", c.dp},
                    {"tp", c.tp},
                    {"pp", c.pp},
                    {"ep", c.ep},
                    {"cp", c.cp},
                    {"sequence_parallel", c.sequence_parallel},
                    {"schedule", c.schedule},
                    {"chunks", c.chunks},
                    {"microbatches", c.microbatches},
                    {"micro_batch_size", c.micro_batch_size},
                    {"recompute", RecomputeName(c.recompute)},
                    {"stage_layers", c.stage_layers},
                    {"zero", c.zero},
                    {"step_s", c.step_s},
                    {"tokens_per_s", c.tokens_per_s},
                    {"mfu", c.mfu},
                    {"bubble_fraction", c.bubble},
                    {"peak_bytes", c.peak_bytes},
                    {"tp_comm_s", c.tp_comm_s},
                    {"dp_exposed_s", c.dp_exposed_s},
                    {"ep_comm_s", c.ep_comm_s},
                    {"cp_comm_s", c.cp_comm_s},
                    {"held_back", c.held_back}});
  }
  const nlohmann::json json = {{"world", r.world},
                               {"params", r.model.Params()},
                               {"memory_per_rank", r.memory_per_rank},
                               {"device_flops", r.device_flops},
                               {"layouts", plan.layouts},
                               {"over_memory", plan.over_memory},
                               {"simulated", plan.simulated},
                               {"seconds", seconds},
                               {"best", best}};
  return json.dump(2) + "\n";
}

}  // namespace conveyor
