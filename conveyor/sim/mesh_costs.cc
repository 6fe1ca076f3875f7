#include "conveyor/sim/mesh_costs.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "conveyor/common/error.h"

namespace conveyor {
namespace {

// Per pipeline coordinate, the longest time of `time_of(group, link)` over the groups of
// `axis` at that coordinate.
template <typename TimeOf>
std::vector<double> SlowestPerPipelineRank(const Mesh& mesh, const MeshNetwork& network,
                                           MeshAxis axis, TimeOf time_of) {
  std::vector<double> times(mesh.pp(), 0.0);
  for (const std::vector<int>& group : mesh.Groups(axis)) {
    double& t = times[mesh.coords(group.front()).pp];
    t = std::max(t, time_of(static_cast<int>(group.size()), network.SlowestLink(group)));
  }
  return times;
}

// `costs` with `tp_time[rank]` added to every F, I and B (twice to an overlapped F&B) of
// each stage, as per-stage costs.
CostModel WithTensorParallel(const CostModel& costs, const Layout& layout,
                             const std::vector<double>& tp_time) {
  CostModel out = costs;
  out.stages.clear();
  for (int s = 0; s < layout.num_stages(); ++s) {
    StageCost c = costs.cost(s);
    const double t = tp_time[layout.rank_of(s)];
    c.f += t;
    c.i += t;
    if (c.b >= 0) c.b += t;  // otherwise B = I + W, which now holds t once
    if (c.overlap >= 0) c.overlap += 2 * t;
    out.stages.push_back(c);
  }
  return out;
}

// When each stage's last backward work (B, I, W, or the backward half of an overlapped
// unit) ends in `timeline`.
std::vector<double> GradientsReadyAt(const Timeline& timeline, int num_stages) {
  std::vector<double> ready(num_stages, 0.0);
  for (const Span& s : timeline.spans) {
    const Action& a = s.action;
    const bool backward =
        a.op == Op::kBackward || a.op == Op::kBackwardInput || a.op == Op::kBackwardWeight;
    if (backward || a.op == Op::kOverlapFB) {
      const int stage = a.op == Op::kOverlapFB ? a.overlap_stage : a.stage;
      ready[stage] = std::max(ready[stage], s.end);
    }
  }
  return ready;
}

}  // namespace

double ModelShape::activation_bytes() const {
  return static_cast<double>(micro_batch_size) * seq_len * hidden * element_bytes;
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
  result.tp_time = SlowestPerPipelineRank(mesh, network, MeshAxis::kTp, [&](int n, Link link) {
    return 2.0 * shape.layers_per_stage * RingAllReduceTime(n, activation, link);
  });
  const double params = shape.stage_param_bytes(mesh.tp());
  result.dp_buckets = static_cast<int64_t>(std::ceil(params / shape.bucket_bytes));
  result.dp_time = SlowestPerPipelineRank(mesh, network, MeshAxis::kDp, [&](int n, Link link) {
    // Bandwidth over all the bytes; latency once per bucket.
    return RingAllReduceTime(n, params, Link{0, link.bandwidth}) +
           result.dp_buckets * RingAllReduceTime(n, 0, Link{link.latency, link.bandwidth});
  });

  result.pipeline = Simulate(program, WithTensorParallel(costs, layout, result.tp_time), options);
  result.step_without_dp = result.pipeline.makespan;
  result.step = result.step_without_dp;
  if (mesh.dp() == 1) return result;

  // Each rank's channel reduces its stages in the order their gradients are ready; what
  // runs before the pipeline's end hides behind it.
  const std::vector<double> ready = GradientsReadyAt(result.pipeline.timeline, layout.num_stages());
  double hidden = 0;
  for (int r = 0; r < layout.num_ranks(); ++r) {
    std::vector<int> stages = layout.stages_of(r);
    std::stable_sort(stages.begin(), stages.end(),
                     [&](int a, int b) { return ready[a] < ready[b]; });
    double free = 0;
    for (int s : stages) {
      const double start = std::max(free, ready[s]);
      free = start + result.dp_time[r];
      result.pipeline.timeline.phases.push_back(Phase{r, "dp all-reduce stage " + std::to_string(s),
                                                      start, free, PhaseTrack::kDataParallel});
      result.dp_comm += result.dp_time[r];
      hidden += std::max(0.0, std::min(free, result.step_without_dp) - start);
    }
    result.step = std::max(result.step, free);
  }
  result.dp_exposed = result.step - result.step_without_dp;
  result.dp_hidden_share = result.dp_comm > 0 ? hidden / result.dp_comm : 1;
  return result;
}

}  // namespace conveyor
