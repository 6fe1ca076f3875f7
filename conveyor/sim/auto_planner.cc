#include "conveyor/sim/auto_planner.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <sstream>

#include "conveyor/common/error.h"
#include "conveyor/mesh/mesh.h"
#include "conveyor/schedule/activation_memory.h"
#include "conveyor/schedule/pipeline_limits.h"
#include "conveyor/schedule/registry.h"
#include "conveyor/sim/mesh_costs.h"

namespace conveyor {

int64_t TransformerSpec::mlp() const {
  if (intermediate > 0) return intermediate;
  if (!gated_mlp) return 4 * hidden;
  return (8 * hidden / 3 + 255) / 256 * 256;
}

double TransformerSpec::BlockParams() const {
  const double c = static_cast<double>(hidden);
  const double head_dim = c / static_cast<double>(heads);
  const double attention = 2 * c * c + 2 * c * static_cast<double>(kv()) * head_dim;  // q, o; k, v
  return attention + (gated_mlp ? 3.0 : 2.0) * c * static_cast<double>(mlp());
}

double TransformerSpec::Params() const {
  return static_cast<double>(layers) * BlockParams() +
         2.0 * static_cast<double>(vocab) * static_cast<double>(hidden);
}

double TransformerSpec::BlockForwardFlops() const {
  return 2 * BlockParams() + 4.0 * static_cast<double>(seq_len) * static_cast<double>(hidden);
}

double TransformerSpec::TrainFlopsPerToken() const {
  const double head = 2.0 * static_cast<double>(hidden) * static_cast<double>(vocab);
  return 3 * (static_cast<double>(layers) * BlockForwardFlops() + head);
}

namespace {

std::vector<int> Divisors(int64_t n, int64_t most) {
  std::vector<int> out;
  for (int64_t d = 1; d <= std::min(n, most); ++d) {
    if (n % d == 0) out.push_back(static_cast<int>(d));
  }
  return out;
}

// Blocks of pipeline part `part` of `parts`: an even split, the first parts one more.
int64_t BlocksOf(int64_t layers, int part, int parts) {
  return layers / parts + (part < layers % parts ? 1 : 0);
}

// What costs `c` against `best`, in a few words.
std::string HeldBack(const PlanCandidate& c, const PlanCandidate& best) {
  std::vector<std::string> why;
  if (c.recompute && !best.recompute) why.push_back("recomputes every forward");
  if (c.bubble > best.bubble + 0.01) {
    std::ostringstream s;
    s.precision(1);
    s << std::fixed << "bubble " << 100 * c.bubble << "% against "
      << 100 * std::max(0.0, best.bubble) << "%";
    why.push_back(s.str());
  }
  if (c.tp_across_nodes) why.push_back("TP across nodes");
  if (c.tp_comm_s > best.tp_comm_s * 1.1 + 1e-6) why.push_back("more TP all-reduce time");
  if (c.dp_exposed_s > best.dp_exposed_s + 1e-3 * best.step_s)
    why.push_back("DP reduction exposed");
  if (c.zero > best.zero) why.push_back("ZeRO-1 to fit");
  if (why.empty()) {
    why.push_back(static_cast<float>(c.step_s) == static_cast<float>(best.step_s)
                      ? "as fast, more memory"
                      : "slower by the simulation");
  }
  std::string out;
  for (const std::string& w : why) out += (out.empty() ? "" : "; ") + w;
  return out;
}

}  // namespace

AutoPlan PlanAuto(const AutoPlanRequest& r) {
  const TransformerSpec& m = r.model;
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
  const int per_node = r.network.ranks_per_node > 0 ? r.network.ranks_per_node : r.world;
  CONVEYOR_CHECK(r.world % per_node == 0)
      << "--world " << r.world << " is not a whole number of nodes of " << per_node;
  std::vector<const ScheduleInfo*> schedules;
  if (r.schedules.empty()) {
    for (const ScheduleInfo& info : AllSchedules()) schedules.push_back(&info);
  } else {
    for (const std::string& name : r.schedules) schedules.push_back(&FindSchedule(name));
  }

  const double c = static_cast<double>(m.hidden), t = static_cast<double>(m.seq_len),
               v = static_cast<double>(m.vocab);
  const double tokens_per_step = static_cast<double>(r.global_batch) * t;
  AutoPlan plan;
  std::vector<PlanCandidate> fits;
  double least_over = std::numeric_limits<double>::infinity();
  for (int tp : Divisors(r.world, per_node)) {
    if (m.heads % tp != 0 || m.kv() % tp != 0) continue;
    for (int pp : Divisors(r.world / tp, m.layers)) {
      const int dp = r.world / tp / pp;
      if (r.global_batch % dp != 0) continue;
      const int64_t per_replica = r.global_batch / dp;
      const Mesh mesh = Mesh::Make(r.world, dp, tp, pp);
      for (const ScheduleInfo* info : schedules) {
        if (pp == 1 && info != schedules.front()) break;  // one rank: every schedule alike
        for (int mbs : Divisors(per_replica, r.max_microbatches)) {
          const ScheduleOptions options{pp, mbs, info->default_chunks};
          std::optional<Program> program;
          try {
            CheckPipelineSize(info->name, options);
            program.emplace(BuildSchedule(info->name, options));
          } catch (const UserError&) {
            continue;  // outside the schedule's preconditions
          }
          const Layout& layout = program->layout;
          const int parts = layout.pipeline_length();
          if (parts > m.layers) continue;
          ++plan.layouts;
          const int64_t b = per_replica / mbs;
          const double bt = static_cast<double>(b) * t;
          const int stages = layout.num_stages();
          std::vector<double> blocks(stages), params(stages);
          for (int s = 0; s < stages; ++s) {
            const int part = layout.part_of(s);
            blocks[s] = static_cast<double>(BlocksOf(m.layers, part, parts));
            params[s] = (blocks[s] * m.BlockParams() + (part == 0 ? v * c : 0) +
                         (part == parts - 1 ? v * c : 0)) /
                        tp;
          }
          for (bool recompute : {false, true}) {
            // Memory: the fullest rank, with the first ZeRO stage that fits.
            std::vector<double> activations(stages);
            for (int s = 0; s < stages; ++s) {
              const double per_block = recompute ? 2 * bt * c : bt * c * (10 + 24.0 / tp);
              activations[s] = blocks[s] * per_block +
                               (layout.part_of(s) == parts - 1 ? bt * v * 4 : 0);  // logits
            }
            const std::vector<double> held = PeakActivations(*program, activations, 0.5);
            int zero = -1;
            double peak = 0;
            for (int z : {0, 1}) {
              if (z == 1 && dp == 1) break;
              const double bytes_per_param =
                  z == 0 ? r.bytes_per_param : r.bytes_per_param / 2 * (1 + 1.0 / dp);
              std::vector<double> rank_bytes(held);
              for (int s = 0; s < stages; ++s) {
                rank_bytes[layout.rank_of(s)] += params[s] * bytes_per_param;
              }
              peak = *std::max_element(rank_bytes.begin(), rank_bytes.end());
              if (peak <= r.memory_per_rank) {
                zero = z;
                break;
              }
            }
            PlanCandidate cand;
            cand.dp = dp, cand.tp = tp, cand.pp = pp;
            cand.schedule = std::string(info->name);
            cand.chunks = info->default_chunks;
            cand.microbatches = mbs;
            cand.micro_batch_size = b;
            cand.recompute = recompute;
            cand.peak_bytes = peak;
            if (zero < 0) {
              ++plan.over_memory;
              if (peak < least_over) least_over = peak, plan.smallest_over = cand;
              continue;
            }
            cand.zero = zero;
            CostModel costs;
            for (int s = 0; s < stages; ++s) {
              const bool head = layout.part_of(s) == parts - 1;
              const double f = bt * (blocks[s] * m.BlockForwardFlops() + (head ? 2 * c * v : 0)) /
                               tp / (r.device_flops * r.efficiency);
              costs.stages.push_back(StageCost{f, recompute ? 2 * f : f, f});
            }
            ModelShape shape;
            shape.hidden = m.hidden;
            shape.seq_len = m.seq_len;
            shape.micro_batch_size = b;
            shape.layers_per_stage =
                static_cast<int64_t>(*std::max_element(blocks.begin(), blocks.end()));
            shape.element_bytes = 2;
            shape.param_bytes_per_stage = *std::max_element(params.begin(), params.end()) * 4;
            const MeshSimResult sim =
                SimulateMesh(*program, costs, mesh, r.network, shape, SimOptions{1});
            ++plan.simulated;
            cand.step_s = sim.step;
            cand.tokens_per_s = tokens_per_step / sim.step;
            cand.mfu = m.TrainFlopsPerToken() * cand.tokens_per_s / (r.world * r.device_flops);
            cand.bubble = sim.pipeline.bubble_fraction;
            cand.tp_comm_s =
                sim.tp_time.empty() ? 0 : *std::max_element(sim.tp_time.begin(), sim.tp_time.end());
            cand.dp_exposed_s = sim.dp_exposed;
            cand.tp_across_nodes = tp > 1 && per_node % tp != 0;
            fits.push_back(cand);
          }
        }
      }
    }
  }
  CONVEYOR_CHECK(plan.layouts > 0)
      << "no layout of " << m.layers << " layers on " << r.world
      << " ranks meets the schedules' preconditions (a global batch of " << r.global_batch
      << " sequences; try a larger one, or fewer ranks)";
  std::stable_sort(fits.begin(), fits.end(), [](const PlanCandidate& a, const PlanCandidate& b) {
    // Equal to 7 digits is equal: the simulations' sums round differently.
    const float sa = static_cast<float>(a.step_s), sb = static_cast<float>(b.step_s);
    if (sa != sb) return sa < sb;
    if (a.zero != b.zero) return a.zero < b.zero;
    return a.peak_bytes < b.peak_bytes;
  });
  for (size_t i = 0; i < fits.size() && static_cast<int>(i) < std::max(r.top, 1); ++i) {
    plan.best.push_back(fits[i]);
    if (i > 0) plan.best.back().held_back = HeldBack(fits[i], fits[0]);
  }
  return plan;
}

}  // namespace conveyor
