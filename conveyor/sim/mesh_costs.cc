#include "conveyor/sim/mesh_costs.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "conveyor/common/error.h"
#include "conveyor/schedule/activation_memory.h"

namespace conveyor {
namespace {

// Per pipeline coordinate, the longest time of `time_of(group, link)` over the groups of
// `axis` at that coordinate, each on its slowest link (its all-to-all's, `all_to_all`).
template <typename TimeOf>
std::vector<double> SlowestPerPipelineRank(const Mesh& mesh, const MeshNetwork& network,
                                           const Mesh::Order& axes, TimeOf time_of,
                                           bool all_to_all = false) {
  std::vector<double> times(mesh.pp(), 0.0);
  for (const std::vector<int>& group : mesh.Groups(axes)) {
    double& t = times[mesh.coords(group.front()).pp];
    const Link link = all_to_all ? network.AllToAllLink(group) : network.SlowestLink(group);
    t = std::max(t, time_of(static_cast<int>(group.size()), link));
  }
  return times;
}

// `costs` with `mesh`'s tp_time[rank] added to every F, I and B (to I and B 3/2 of it under
// sequence parallelism; both halves' to an overlapped F&B; to I and B again where the backward
// recomputes the forward) of each stage, its ring's cp_forward / cp_backward likewise, and the
// experts' all-to-alls (`mesh.ep_time[stage]`, `ep_backward[stage]`; empty: none) to its F and
// to its I and B, as per-stage costs.
CostModel WithMeshComm(const CostModel& costs, const Layout& layout, const MeshSimResult& mesh,
                       const std::vector<double>& ep_backward, const ModelShape& shape) {
  const std::vector<double>& ep_forward = mesh.ep_time;
  CostModel out = costs;
  out.stages.clear();
  for (int s = 0; s < layout.num_stages(); ++s) {
    StageCost c = costs.cost(s);
    const int k = layout.rank_of(s);
    const double ring = mesh.cp_forward.empty() ? 0 : mesh.cp_forward[k];
    const double ring_backward =
        mesh.cp_backward.empty() ? 0 : mesh.cp_backward[k] + (shape.full_recompute ? ring : 0);
    const double t = mesh.tp_time[k];
    const double e = ep_forward.empty() ? 0 : ep_forward[s];
    const double e_backward = ep_backward.empty() ? 0 : ep_backward[s];
    const double backward = (shape.full_recompute ? t : 0) +
                            (shape.sequence_parallel ? 1.5 * t : t) + e_backward + ring_backward;
    c.f += t + e + ring;
    c.i += backward;
    if (c.b >= 0) c.b += backward;  // otherwise B = I + W, which now holds it
    if (c.overlap >= 0) c.overlap += t + e + ring + backward;
    if (!costs.sharing.Shares()) {  // a shared CPU's collectives copy on its cores: work
      c.comm_f += e;
      c.comm_b += e_backward;
    }
    out.stages.push_back(c);
  }
  return out;
}

}  // namespace

double ModelShape::activation_bytes() const {
  return static_cast<double>(micro_batch_size) * seq_len * hidden * element_bytes / cp;
}

double ModelShape::stage_param_bytes(int tp) const {
  if (param_bytes_per_stage > 0) return param_bytes_per_stage;
  return 12.0 * hidden * hidden * layers_per_stage * element_bytes / tp;
}

MeshSimResult SimulateMesh(const Program& program, const CostModel& costs, const Mesh& mesh,
                           const MeshNetwork& network, const ModelShape& shape,
                           const SimOptions& options) {
  const Layout& layout = program.layout;
  CONVEYOR_CHECK(mesh.pp() == layout.num_ranks())
      << "the mesh " << mesh.Describe() << " has pp " << mesh.pp() << ", the program "
      << layout.num_ranks() << " pipeline ranks";
  CheckFitsNodes(network, mesh);
  CONVEYOR_ASSERT(shape.hidden > 0 && shape.seq_len > 0 && shape.micro_batch_size > 0 &&
                  shape.layers_per_stage > 0 && shape.element_bytes > 0 &&
                  shape.param_bytes_per_stage >= 0 && shape.bucket_bytes > 0)
      << "model shape out of range";

  MeshSimResult result;
  const double activation = shape.activation_bytes();
  result.tp_time = SlowestPerPipelineRank(mesh, network, {MeshAxis::kTp}, [&](int n, Link link) {
    return 2.0 * shape.layers_per_stage * RingAllReduceTime(n, activation, link);
  });
  const double params = shape.stage_param_bytes(mesh.tp());
  result.dp_buckets = static_cast<int64_t>(std::ceil(params / shape.bucket_bytes));
  if (mesh.extent(MeshAxis::kCp) > 1) {
    const double blocks = static_cast<double>(shape.layers_per_stage);
    const auto ring = [&](double hidden_under, bool gradients) {
      return [&, hidden_under, gradients](int n, Link link) {
        const double bytes = 2 * activation * shape.kv_share;  // k and v
        const double kv = link.latency + bytes / link.bandwidth;
        const double step = hidden_under / n;
        double exposed = (n - 1) * std::max(0.0, kv - step);
        // The gradients' passes: fp32, after each step's work.
        if (gradients) {
          exposed += n * (link.latency + bytes * 4 / shape.element_bytes / link.bandwidth);
        }
        return blocks * exposed;
      };
    };
    result.cp_forward =
        SlowestPerPipelineRank(mesh, network, {MeshAxis::kCp}, ring(shape.attention_s, false));
    result.cp_backward =
        SlowestPerPipelineRank(mesh, network, {MeshAxis::kCp}, ring(2 * shape.attention_s, true));
  }
  // The dense gradients are summed over dp (x cp).
  const Mesh::Order dp_axes = mesh.extent(MeshAxis::kCp) > 1
                                  ? Mesh::Order{MeshAxis::kCp, MeshAxis::kDp}
                                  : Mesh::Order{MeshAxis::kDp};
  result.dp_time = SlowestPerPipelineRank(mesh, network, dp_axes, [&](int n, Link link) {
    // Bandwidth over all the bytes; latency once per bucket.
    return RingAllReduceTime(n, params, Link{0, link.bandwidth}) +
           result.dp_buckets * RingAllReduceTime(n, 0, Link{link.latency, link.bandwidth});
  });

  std::vector<double> ep_backward;
  if (shape.ep > 1 && !shape.sparse_per_stage.empty()) {
    CONVEYOR_ASSERT(static_cast<int>(shape.sparse_per_stage.size()) == layout.num_stages() &&
                    shape.experts > 0 && shape.top_k > 0)
        << shape.sparse_per_stage.size() << " stages of sparse blocks for " << layout.num_stages()
        << " stages, " << shape.experts << " experts, top " << shape.top_k;
    const double rows = activation * static_cast<double>(shape.top_k);
    const Mesh experts = Mesh::FoldExperts(mesh, shape.ep);
    const std::vector<double> forward = SlowestPerPipelineRank(
        experts, network, {MeshAxis::kEp},
        [&](int n, Link link) {
          return AllToAllTime(n, 8.0 * static_cast<double>(shape.experts), link) +
                 2 * AllToAllTime(n, rows, link);
        },
        /*all_to_all=*/true);
    const std::vector<double> backward = SlowestPerPipelineRank(
        experts, network, {MeshAxis::kEp},
        [&](int n, Link link) { return 2 * AllToAllTime(n, rows, link); }, /*all_to_all=*/true);
    for (int s = 0; s < layout.num_stages(); ++s) {
      const int k = layout.rank_of(s);
      const double sparse = static_cast<double>(shape.sparse_per_stage[s]);
      result.ep_time.push_back(sparse * forward[k]);
      ep_backward.push_back(sparse * (backward[k] + (shape.full_recompute ? forward[k] : 0)));
    }
    for (const std::vector<Action>& actions : program.ranks) {
      double waits = 0;
      ForEachHalf(actions, [&](Op op, int s) {
        if (op == Op::kForward) waits += result.ep_time[s];
        if (op == Op::kBackward || op == Op::kBackwardInput) waits += ep_backward[s];
      });
      result.ep_comm = std::max(result.ep_comm, waits);
    }
  }

  // Each rank's reductions run on a channel of its own, in the order its stages' gradients
  // become final (the simulator's CostModel::reduce); what runs before the pipeline's end
  // hides behind it.
  CostModel with_mesh = WithMeshComm(costs, layout, result, ep_backward, shape);
  if (mesh.dp() * mesh.extent(MeshAxis::kCp) > 1) {
    for (int s = 0; s < layout.num_stages(); ++s) {
      with_mesh.reduce.push_back(result.dp_time[layout.rank_of(s)]);
    }
  }
  result.pipeline = Simulate(program, with_mesh, options);
  result.step_without_dp = result.pipeline.makespan;
  result.step = std::max(result.step_without_dp, result.pipeline.reduced_end);
  result.dp_exposed = result.step - result.step_without_dp;
  double hidden = 0;
  for (const Phase& phase : result.pipeline.timeline.phases) {
    if (phase.track != PhaseTrack::kDataParallel) continue;
    result.dp_comm += phase.end - phase.start;
    hidden += std::max(0.0, std::min(phase.end, result.step_without_dp) - phase.start);
  }
  result.dp_hidden_share = result.dp_comm > 0 ? hidden / result.dp_comm : 1;
  return result;
}

}  // namespace conveyor
