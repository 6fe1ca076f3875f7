#include "conveyor/sim/auto_planner.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "conveyor/common/byte_size.h"
#include "conveyor/common/error.h"
#include "conveyor/common/text.h"
#include "conveyor/mesh/mesh.h"
#include "conveyor/partition/partition.h"
#include "conveyor/schedule/activation_memory.h"
#include "conveyor/schedule/pipeline_limits.h"
#include "conveyor/schedule/registry.h"
#include "conveyor/sim/layer_cost_model.h"
#include "conveyor/sim/mesh_costs.h"

namespace conveyor {

namespace {

std::vector<int> Divisors(int64_t n, int64_t most) {
  std::vector<int> out;
  for (int64_t d = 1; d <= std::min(n, most); ++d) {
    if (n % d == 0) out.push_back(static_cast<int>(d));
  }
  return out;
}

// One stage's activation memory for one micro-batch.
struct StageBytes {
  double held = 0;           // kept from F to its backward (its input under full recomputation)
  double whole = 0;          // its layers' activations
  double forward_peak = 0;   // more while F runs: its largest transient (under full
                             // recomputation, of a forward that keeps nothing)
  double backward_peak = 0;  // more while a backward runs: its workspace, the next input
  double for_w = 0;          // what W needs (the linear layers' inputs and output gradients)
  double eval = 0;           // an evaluation's forward, keeping nothing: its input and its
                             // largest layer's infer_bytes
};

// The most activation memory each rank holds, following its actions. F of stage s needs
// forward_peak more while it runs and keeps held; a backward (B or I) needs backward_peak
// more while it runs and, under full recomputation, the stage's whole recomputed; I frees
// what it kept except for_w (kept or recomputed), which W frees. An evaluation's forward of
// one of its stages needs that stage's eval, with nothing else held.
std::vector<double> HeldActivations(const Program& program, const std::vector<StageBytes>& bytes,
                                    bool full) {
  std::vector<double> peaks;
  for (const std::vector<Action>& actions : program.ranks) {
    double now = 0, peak = 0;
    auto apply = [&](Op op, int s) {
      const StageBytes& b = bytes[s];
      switch (op) {
        case Op::kForward:
          peak = std::max(peak, now + b.held + b.forward_peak);
          now += b.held;
          break;
        case Op::kBackward:
        case Op::kBackwardInput:
          peak = std::max(peak, now + b.backward_peak + (full ? b.whole : 0));
          now -= b.held;
          if (op == Op::kBackwardInput) now += b.for_w;
          break;
        case Op::kBackwardWeight:
          now -= b.for_w;
          break;
        default:
          break;
      }
    };
    ForEachHalf(actions, apply);
    for (int s : program.layout.stages_of(static_cast<int>(peaks.size()))) {
      peak = std::max(peak, bytes[s].eval);
    }
    peaks.push_back(peak);
  }
  return peaks;
}

std::string Sizes(const std::vector<LayerRange>& ranges) {
  std::string out;
  for (const LayerRange& range : ranges) {
    out += (out.empty() ? "" : ",") + std::to_string(range.size());
  }
  return out;
}

// What costs `c` against `best`, in a few words.
std::string HeldBack(const PlanCandidate& c, const PlanCandidate& best) {
  std::vector<std::string> why;
  if (c.recompute != best.recompute && c.recompute != Recompute::kNone) {
    why.push_back(c.recompute == Recompute::kFull ? "recomputes every forward"
                                                  : "recomputes the attention scores");
  }
  if (c.bubble > best.bubble + 0.01) {
    std::ostringstream s;
    s.precision(1);
    s << std::fixed << "bubble " << 100 * c.bubble << "% against "
      << 100 * std::max(0.0, best.bubble) << "%";
    why.push_back(s.str());
  }
  if (c.tp_across_nodes) why.push_back("TP across nodes");
  if (c.tp_comm_s > best.tp_comm_s * 1.1 + 1e-6) why.push_back("more TP all-reduce time");
  if (c.sequence_parallel && !best.sequence_parallel) why.push_back("sequence parallel");
  if (c.cp_comm_s > best.cp_comm_s * 1.1 + 1e-6) why.push_back("more ring time");
  if (c.dp_exposed_s > best.dp_exposed_s + 1e-3 * best.step_s)
    why.push_back("DP reduction exposed");
  if (c.zero > best.zero) why.push_back("ZeRO-1 to fit");
  if (c.ep_comm_s > best.ep_comm_s * 1.1 + 1e-6) why.push_back("more all-to-all time");
  if (why.empty()) {
    why.push_back(static_cast<float>(c.step_s) == static_cast<float>(best.step_s)
                      ? "as fast, more memory"
                      : "slower by the simulation");
  }
  std::string out;
  for (const std::string& w : why) out += (out.empty() ? "" : "; ") + w;
  return out;
}

int RanksPerNode(const AutoPlanRequest& r) {
  return r.network.ranks_per_node > 0 ? r.network.ranks_per_node : r.world;
}

// UserError naming the first value of `r` that cannot be planned.
void CheckRequest(const AutoPlanRequest& r) {
  const TransformerSpec& m = r.model;
  CONVEYOR_CHECK(std::isfinite(r.bucket_bytes) && r.bucket_bytes >= 1)
      << "the data-parallel bucket of " << r.bucket_bytes << " bytes must be at least 1";
  CONVEYOR_CHECK(r.world >= 1 && r.world <= (1 << 20))
      << "--world " << r.world << " is not in [1, 1048576]";
  CONVEYOR_CHECK(m.layers >= 1 && m.hidden >= 1 && m.heads >= 1 && m.vocab >= 1 && m.seq_len >= 1 &&
                 m.hidden % m.heads == 0 && m.heads % m.kv() == 0)
      << "the model's sizes do not fit together: layers " << m.layers << ", hidden " << m.hidden
      << ", heads " << m.heads << ", kv heads " << m.kv() << " (heads must divide hidden, kv "
      << "heads the heads)";
  CONVEYOR_CHECK(r.global_batch >= 1) << "--global-batch " << r.global_batch << " must be >= 1";
  CONVEYOR_CHECK(std::isfinite(r.device_flops) && r.device_flops > 0)
      << "--device-tflops must be positive";
  CONVEYOR_CHECK(r.efficiency > 0 && r.efficiency <= 1)
      << "--efficiency " << r.efficiency << " is not in (0, 1]";
  CONVEYOR_CHECK(std::isfinite(r.memory_per_rank) && r.memory_per_rank > 0)
      << "--memory-per-rank must be positive";
  const int per_node = RanksPerNode(r);
  CONVEYOR_CHECK(r.world % per_node == 0)
      << "--world " << r.world << " is not a whole number of nodes of " << per_node;
}

}  // namespace

void ShareOneCpu(AutoPlanRequest& r, double cores) {
  r.shared_compute = r.measured ? cores * r.measured->FullCapacity() / r.measured->cores : cores;
  r.hop_s = kLocalHopSeconds;
  if (r.network.intra == MeshNetwork{}.intra) r.network.intra = LocalCpuLink();
  if (r.network.all_to_all_intra.bandwidth <= 0) r.network.all_to_all_intra = LocalGlooLink();
}

void ShareOneGpu(AutoPlanRequest& r) {
  CONVEYOR_CHECK(r.measured.has_value() && r.measured->device == "cuda")
      << "planning ranks that share one GPU needs layer costs measured on it (conveyor "
         "profile --device cuda --ranks N), not "
      << (r.measured ? "costs measured on the " + r.measured->device : "FLOP counts");
  CONVEYOR_CHECK(r.tp <= 1) << "--tp " << r.tp
                            << ": tensor-parallel ranks cannot share one GPU as threads (they "
                               "would wait for each other inside the backward)";
  r.tp = 1;
  r.shared_compute = r.measured->FullCapacity();
  r.hop_s = kLocalGpuHopSeconds;
  if (r.network.intra == MeshNetwork{}.intra) r.network.intra = LocalGpuLink();
}

CandidatePricer::CandidatePricer(const AutoPlanRequest& request) : request_(request) {
  CheckRequest(request);
  const AutoPlanRequest& r = request;
  per_node_ = RanksPerNode(r);
  tokens_per_step_ = static_cast<double>(r.global_batch) * r.model.seq_len;
  // A fused optimizer (FLOP counts: GPUs) allocates nothing beside its state.
  optimizer_bytes_per_param_ = r.measured ? r.measured->optimizer_bytes : 0;
  // Ranks on one host: the sums of DualPipe's copies, a pair of ranks each, run at once after
  // the last action and share its copying bandwidth. (The DP reductions are work on the
  // shared cores in the simulation.)
  copies_link_ = r.network.intra;
  if (r.shared_compute > 0) copies_link_.bandwidth /= std::max(1, r.world / 2);
  const Link slowest = per_node_ < r.world ? r.network.inter : r.network.intra;
  step_collectives_s_ = r.step_collectives * RingAllReduceTime(r.world, 8.0 * r.world, slowest);
}

PricedCandidate CandidatePricer::Price(const PlanLayout& choice, Recompute recompute,
                                       bool sequence_parallel) {
  const AutoPlanRequest& r = request_;
  const TransformerSpec& m = r.model;
  const int dp = choice.dp, tp = choice.tp, ep = choice.ep;
  const int64_t b = choice.micro_batch_size;
  const Program& program = choice.program;
  const Layout& layout = program.layout;
  const int parts = layout.pipeline_length();
  const int stages = layout.num_stages();
  const bool full = recompute == Recompute::kFull;
  const int cp = choice.cp;
  const LayerCostEstimate costs =
      EstimateLayerCosts(m, r.measured ? &*r.measured : nullptr, r.device_flops * r.efficiency,
                         LayerCostLayout{.tp = tp,
                                         .cp = cp,
                                         .sequences = b,
                                         .recompute = recompute,
                                         .sequence_parallel = sequence_parallel});
  std::vector<LayerRange>& split = splits_[{parts, tp, cp, r.measured ? b : 0, recompute}];
  if (split.empty()) {
    std::vector<double> work;
    for (const LayerSample& l : costs.layers) work.push_back(l.forward_s + l.backward_s);
    split = Partition(work, parts);
  }
  // Per stage: its layers' parameters on a rank (of them, its experts'), sparse blocks,
  // compute and activations.
  std::vector<double> params(stages), expert_params(stages);
  std::vector<int64_t> sparse(stages);
  std::vector<StageBytes> bytes(stages);
  CostModel cost_model;
  int64_t most_blocks = 0;
  for (int s = 0; s < stages; ++s) {
    const LayerRange range = split[layout.part_of(s)];
    StageCost stage{0, 0, 0, 0};
    for (int l = range.begin; l < range.end; ++l) {
      const LayerSample& layer = costs.layers[l];
      const double experts = costs.expert_params[l];
      params[s] += costs.params[l] - experts + experts / ep;
      expert_params[s] += experts / ep;
      sparse[s] += experts > 0 ? 1 : 0;
      bytes[s].whole += layer.activation_bytes;
      bytes[s].for_w += layer.weight_bytes;
      bytes[s].forward_peak =
          std::max(bytes[s].forward_peak, full ? layer.infer_bytes : layer.forward_bytes);
      bytes[s].backward_peak = std::max(bytes[s].backward_peak, layer.backward_bytes);
      bytes[s].eval = std::max(bytes[s].eval, costs.input_bytes[range.begin] + layer.infer_bytes);
      stage.f += layer.forward_s, stage.i += layer.input_s, stage.w += layer.weight_s;
      stage.b += layer.backward_s;
    }
    bytes[s].held = full ? costs.input_bytes[range.begin] : bytes[s].whole;
    // The next micro-batch's input arrives while a backward runs.
    bytes[s].backward_peak += costs.input_bytes.back();
    cost_model.stages.push_back(stage);
    most_blocks =
        std::max<int64_t>(most_blocks, std::min(range.end, static_cast<int>(m.layers) + 1) -
                                           std::max(range.begin, 1));
  }
  // Memory: the fullest rank, with the first ZeRO stage that fits.
  std::vector<double> held = HeldActivations(program, bytes, full);
  std::vector<double> rank_params(layout.num_ranks()), rank_experts(layout.num_ranks());
  for (int s = 0; s < stages; ++s) {
    rank_params[layout.rank_of(s)] += params[s];
    rank_experts[layout.rank_of(s)] += expert_params[s];
  }
  // After the backward, the activations gone: with dp > 1 the reducer's flat bucket and the
  // ring's parts in flight (one of 1 / dp of it at dp 2, two beyond); with copies of the parts
  // (DualPipe), the sum of their gradients (flat, the transport's buffer, copied back: three
  // times the rank's).
  const double in_flight = 1 + std::min(2, dp - 1) / static_cast<double>(dp);
  for (int s = 0; s < stages; ++s) {
    if (dp > 1) {
      double& rank_bytes = held[layout.rank_of(s)];
      rank_bytes = std::max(rank_bytes, std::min(params[s] * 4, r.bucket_bytes) * in_flight);
    }
  }
  if (stages > parts) {
    for (size_t k = 0; k < held.size(); ++k) held[k] = std::max(held[k], 3 * 4 * rank_params[k]);
  }
  int zero = -1;
  double peak = 0;
  for (int z : {0, 1}) {
    if (z == 1 && dp == 1) break;
    // ZeRO-1 shards the moments over a parameter's replicas: dp, an expert's dp / ep.
    const double bytes_per_param =
        z == 0 ? r.bytes_per_param : r.bytes_per_param / 2 * (1 + 1.0 / dp);
    const double bytes_per_expert_param =
        z == 0 ? r.bytes_per_param : r.bytes_per_param / 2 * (1 + static_cast<double>(ep) / dp);
    // The activations' peak, or the optimizer's step beside the state: its temporaries; under
    // ZeRO-1 those of the rank's shard, then the gather of every replica's updated range (the
    // rank's whole parameters again, flat), with its own range and its reduce-scattered
    // gradients beside (ShardedAdamW: a dp 2 x pp 2 run of 34 k parameters a rank peaked at
    // 0.735 MiB where 0.50 was planned without them).
    const double optimizer_bytes = z == 1
                                       ? std::max(optimizer_bytes_per_param_ / dp, 4.0) + 8.0 / dp
                                       : optimizer_bytes_per_param_;
    peak = 0;
    for (size_t k = 0; k < held.size(); ++k) {
      peak = std::max(peak, (rank_params[k] - rank_experts[k]) * bytes_per_param +
                                rank_experts[k] * bytes_per_expert_param +
                                std::max(held[k], rank_params[k] * optimizer_bytes));
    }
    if (peak <= r.memory_per_rank) {
      zero = z;
      break;
    }
  }
  PricedCandidate priced;
  PlanCandidate& cand = priced.candidate;
  cand.dp = dp, cand.tp = tp, cand.pp = choice.pp, cand.ep = ep, cand.cp = cp;
  cand.sequence_parallel = sequence_parallel;
  cand.schedule = std::string(choice.schedule);
  cand.chunks = choice.chunks;
  cand.microbatches = choice.microbatches;
  cand.micro_batch_size = b;
  cand.recompute = recompute;
  cand.stage_layers = Sizes(split);
  cand.peak_bytes = peak;
  if (zero < 0) return priced;
  priced.fits = true;
  cand.zero = zero;
  cost_model.comm_latency = r.hop_s >= 0 ? r.hop_s : r.network.intra.latency;
  cost_model.pairs_at_once = r.pairs_at_once && tp == 1;
  if (r.shared_compute > 0) {
    // The dp x tp pipelines compute at once, each with a share of the machine: k busy ranks
    // of one are k x dp x tp busy ranks of the machine.
    const int copies = dp * tp;
    std::vector<double> by_busy;  // measured: the table's, in proportion
    for (int k = 1; r.measured && k <= layout.num_ranks(); ++k) {
      by_busy.push_back(r.shared_compute *
                        r.measured->CapacityAt(static_cast<double>(b), k * copies) /
                        r.measured->FullCapacity() / copies);
    }
    cost_model.sharing = ComputeSharing::OneDevice(
        layout.num_ranks(), by_busy.empty() ? r.shared_compute / copies : by_busy.back());
    cost_model.sharing.busy_capacity = {by_busy};
  }
  // After the last action of every rank (the trainer's gradient norm is a collective before
  // its optimizer's step): where a part of the model has a copy on another rank (DualPipe's
  // two directions), the sum of their gradients, then the step's work. Not in the simulation,
  // which would start a rank's optimizer as soon as its own actions end.
  const double most_params = *std::max_element(rank_params.begin(), rank_params.end());
  const double optimizer_work = r.measured ? most_params * r.measured->optimizer_s : 0;
  const double copies_sum =
      stages > parts ? RingAllReduceTime(stages / parts, most_params * 4, copies_link_) : 0;
  ModelShape shape;
  shape.hidden = m.hidden;
  shape.seq_len = m.seq_len;
  shape.micro_batch_size = b;
  shape.layers_per_stage = std::max<int64_t>(most_blocks, 1);
  shape.element_bytes = r.measured ? r.measured->element_bytes : 2;
  shape.bucket_bytes = r.bucket_bytes;
  shape.full_recompute = full;
  shape.sequence_parallel = sequence_parallel;
  shape.cp = cp;
  shape.kv_share = static_cast<double>(m.kv()) / static_cast<double>(m.heads);
  // A block's attention products: 4 T C of its forward's FLOPs a token.
  const LayerSample& block = costs.layers[std::min<size_t>(1, costs.layers.size() - 1)];
  shape.attention_s =
      block.forward_s * 4.0 * static_cast<double>(m.seq_len * m.hidden) / m.BlockForwardFlops();
  shape.param_bytes_per_stage = *std::max_element(params.begin(), params.end()) * 4;
  shape.ep = ep;
  shape.experts = m.experts;
  shape.top_k = m.top_k;
  if (m.experts > 0) shape.sparse_per_stage = sparse;
  const Mesh mesh = cp > 1 ? Mesh::Make(r.world, {{MeshAxis::kTp, tp},
                                                  {MeshAxis::kCp, cp},
                                                  {MeshAxis::kDp, dp},
                                                  {MeshAxis::kPp, choice.pp}})
                           : Mesh::Make(r.world, dp, tp, choice.pp);
  const MeshSimResult sim =
      SimulateMesh(program, cost_model, mesh, r.network, shape, SimOptions{1});
  // The simulated step ends at the last action (or DP reduction); the step's end follows it,
  // the optimizer's work every rank's at once, so at the rate of all of them busy where they
  // share the machine.
  const double end_rate = r.shared_compute > 0 ? cost_model.sharing.Rate(0, layout.num_ranks()) : 1;
  cand.step_s = sim.step + copies_sum + optimizer_work / end_rate + step_collectives_s_;
  cand.tokens_per_s = tokens_per_step_ / cand.step_s;
  cand.mfu =
      r.measured ? -1 : m.TrainFlopsPerToken() * cand.tokens_per_s / (r.world * r.device_flops);
  cand.bubble = sim.pipeline.bubble_fraction;
  cand.tp_comm_s =
      sim.tp_time.empty() ? 0 : *std::max_element(sim.tp_time.begin(), sim.tp_time.end());
  cand.dp_exposed_s = sim.dp_exposed;
  cand.ep_comm_s = sim.ep_comm;
  for (size_t k = 0; k < sim.cp_forward.size(); ++k) {
    cand.cp_comm_s = std::max(cand.cp_comm_s, sim.cp_forward[k] + sim.cp_backward[k]);
  }
  cand.tp_across_nodes = tp > 1 && per_node_ % tp != 0;
  return priced;
}

int64_t ForEachPlanLayout(const AutoPlanRequest& r,
                          const std::function<void(const PlanLayout&)>& visit) {
  CheckRequest(r);
  const TransformerSpec& m = r.model;
  const int per_node = RanksPerNode(r);
  std::vector<const ScheduleInfo*> schedules;
  if (r.schedules.empty()) {
    for (const ScheduleInfo& info : AllSchedules()) schedules.push_back(&info);
  } else {
    for (const std::string& name : r.schedules) schedules.push_back(&FindSchedule(name));
  }
  // (tp, pp, cp) meshes first: every size dividing the world, TP inside a node.
  std::vector<std::tuple<int, int, int>> meshes;
  for (int tp : Divisors(r.world, per_node)) {
    if (!m.SplitsOver(tp) || (r.tp > 0 && tp != r.tp)) continue;
    for (int pp : Divisors(r.world / tp, m.layers + 2)) {
      for (int cp : Divisors(r.world / tp / pp, r.context_parallel ? r.world : 1)) {
        const int dp = r.world / tp / pp / cp;
        if (m.seq_len % (2 * cp) != 0 && cp > 1) continue;
        if (r.global_batch % dp == 0 && (r.pp <= 0 || pp == r.pp) && (r.dp <= 0 || dp == r.dp) &&
            (r.cp <= 0 || cp == r.cp)) {
          meshes.emplace_back(tp, pp, cp);
        }
      }
    }
  }
  int64_t visited = 0;
  for (const auto& [tp, pp, cp] : meshes) {
    const int dp = r.world / tp / pp / cp;
    const int64_t per_replica = r.global_batch / dp;
    // The expert-parallel sizes, each dividing dp and the experts (1 alone for a dense model).
    std::vector<int> eps;
    for (int ep : Divisors(dp, m.experts > 0 ? dp : 1)) {
      if ((m.experts == 0 || m.experts % ep == 0) && (r.ep <= 0 || ep == r.ep)) eps.push_back(ep);
    }
    if (eps.empty()) continue;
    for (const ScheduleInfo* info : schedules) {
      if (pp == 1 && info != schedules.front()) break;  // one rank: every schedule alike
      for (int chunks = info->default_chunks;
           chunks == info->default_chunks ||
           (info->takes_chunks && pp > 1 && chunks <= r.max_chunks && pp * chunks <= m.layers + 2);
           ++chunks) {
        for (int mbs : Divisors(per_replica, r.max_microbatches)) {
          const ScheduleOptions options{pp, mbs, chunks};
          std::optional<Program> program;
          try {
            CheckPipelineSize(info->name, options);
            program.emplace(BuildSchedule(info->name, options));
          } catch (const UserError&) {
            continue;  // outside the schedule's preconditions
          }
          if (program->layout.pipeline_length() > m.layers + 2) continue;
          for (size_t e = 0; e < eps.size(); ++e) {  // one program for every ep
            ++visited;
            visit(PlanLayout{.dp = dp,
                             .tp = tp,
                             .pp = pp,
                             .ep = eps[e],
                             .cp = cp,
                             .schedule = info->name,
                             .chunks = chunks,
                             .microbatches = mbs,
                             .micro_batch_size = per_replica / mbs,
                             .program = e + 1 < eps.size() ? *program : std::move(*program)});
          }
        }
      }
    }
  }
  return visited;
}

std::vector<Recompute> PlannedRecomputes(const AutoPlanRequest& request) {
  if (request.measured.has_value())
    return {Recompute::kNone, Recompute::kSelective, Recompute::kFull};
  return {Recompute::kNone, Recompute::kFull};
}

std::string NoLayoutFits(const AutoPlanRequest& r, const AutoPlan& plan) {
  const PlanCandidate& c = plan.smallest_over;
  std::ostringstream out;
  out << "no layout fits " << ByteSize(r.memory_per_rank) << " a rank: the smallest need is "
      << ByteSize(c.peak_bytes) << " (dp x tp x pp " << MeshSizes(c) << ", " << c.schedule << ", "
      << c.microbatches << " micro-batches of " << c.micro_batch_size
      << (c.recompute == Recompute::kNone
              ? ""
              : ", " + std::string(RecomputeName(c.recompute)) + " recomputation")
      << ", ZeRO-1 where dp > 1)";
  return out.str();
}

std::string MeshSizes(const PlanCandidate& c) {
  return Printf("%d x %d x %d", c.dp, c.tp, c.pp) + (c.ep > 1 ? Printf(", ep %d", c.ep) : "") +
         (c.cp > 1 ? Printf(", cp %d", c.cp) : "") + (c.sequence_parallel ? ", sp" : "");
}

AutoPlan PlanAuto(const AutoPlanRequest& r) {
  CandidatePricer pricer(r);
  const std::vector<Recompute> recomputes = PlannedRecomputes(r);
  AutoPlan plan;
  std::vector<PlanCandidate> fits;
  double least_over = std::numeric_limits<double>::infinity();
  plan.layouts = ForEachPlanLayout(r, [&](const PlanLayout& layout) {
    for (Recompute recompute : recomputes) {
      for (bool sequence_parallel : {false, true}) {
        if (sequence_parallel &&
            (layout.tp == 1 || r.model.seq_len % (layout.tp * layout.cp) != 0)) {
          break;
        }
        PricedCandidate priced = pricer.Price(layout, recompute, sequence_parallel);
        const PlanCandidate& cand = priced.candidate;
        if (!priced.fits) {
          ++plan.over_memory;
          if (cand.peak_bytes < least_over) least_over = cand.peak_bytes, plan.smallest_over = cand;
          continue;
        }
        ++plan.simulated;
        fits.push_back(std::move(priced.candidate));
      }
    }
  });
  CONVEYOR_CHECK(plan.layouts > 0)
      << "no layout of " << r.model.layers << " layers on " << r.world
      << " ranks meets the schedules' preconditions (a global batch of " << r.global_batch
      << " sequences; try a larger one, or fewer ranks)";
  std::stable_sort(fits.begin(), fits.end(), [](const PlanCandidate& a, const PlanCandidate& b) {
    // Equal to 7 digits is equal: the simulations' sums round differently.
    const float sa = static_cast<float>(a.step_s), sb = static_cast<float>(b.step_s);
    if (sa != sb) return sa < sb;
    if (a.zero != b.zero) return a.zero < b.zero;
    const bool a_keeps = a.recompute == Recompute::kNone, b_keeps = b.recompute == Recompute::kNone;
    if (a_keeps != b_keeps) return a_keeps;
    return a.peak_bytes < b.peak_bytes;
  });
  for (size_t i = 0; i < fits.size() && static_cast<int>(i) < std::max(r.top, 1); ++i) {
    plan.best.push_back(fits[i]);
    if (i > 0) plan.best.back().held_back = HeldBack(fits[i], fits[0]);
  }
  return plan;
}

}  // namespace conveyor
