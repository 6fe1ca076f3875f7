// The communication a dp x tp x pp mesh adds to one pipeline's step, simulated.
//
// Every data-parallel replica and every tensor-parallel shard runs the same pipeline program
// on its own slice, so the mesh is simulated as one pipeline (the program's ranks are the
// mesh's pipeline ranks, pp = program.layout.num_ranks()) whose costs include what the other
// two axes add. Where groups at the same pipeline rank sit on different links, the slowest
// one sets that pipeline rank's time (the others wait for it).
//
// Tensor parallelism (Megatron-LM): each transformer block all-reduces its (b, T, C)
// activation twice in its forward and twice in its backward. Every F, I and B of a stage
// on pipeline rank k gets
//
//   tp_time[k] = 2 * layers_per_stage * RingAllReduceTime(tp, b*T*C*element_bytes, link)
//
// where link is the slowest link of the slowest TP group at pipeline coordinate k. W
// exchanges nothing; an overlapped F&B unit pays both halves'. Under sequence parallelism
// (Korthikanti et al.) the all-reduces become all-gathers and reduce-scatters of the same
// bytes and the backward gathers each column-parallel input again: I and B pay 3/2 tp_time[k].
// Under full recomputation the backward runs the forward again, its collectives too: I and B
// pay tp_time[k] more.
//
// Context parallelism (cp > 1): each block's attention passes the keys and values (k and v of
// the rank's b T/cp tokens, C kv_share wide each) around the ring, cp - 1 steps, each step's
// message hidden under the step's block of scores (attention_s / cp); the backward passes them
// again under twice that, and their fp32 gradients cp steps after each block's work, exposed. Every
// F of a stage on pipeline rank k gets
//
//   cp_forward[k] = layers_per_stage * (cp - 1) * max(0, message - attention_s / cp)
//
// and every I and B cp_backward[k] (with the forward's again under full recomputation), on the
// slowest CP group's link. The DP reduction then runs over dp x cp ranks.
//
// Expert parallelism (ep > 1, folded over dp: Mesh::FoldExperts): each sparse block's forward
// sends its tokens' top_k copies to their experts' ranks and back (the dispatch and the
// combine, two all-to-alls of b*T*top_k*C*element_bytes a rank, an even split assumed, after
// one of the experts' token counts), its backward the gradients the same two ways. Every F
// of a stage with `sparse` such blocks gets
//
//   ep_forward = sparse * (AllToAllTime(ep, 8 * experts, link) + 2 * AllToAllTime(ep, rows, link))
//
// and every I and B the two rows' (and the forward's again under full recomputation), on the
// slowest EP group's link at that pipeline coordinate (MeshNetwork::AllToAllLink); as comm_f and
// comm_b (cost_model.h) too, which the other half of an OVERLAP_F_B unit run at once may hide,
// unless the ranks share a device (CostModel::sharing: on one CPU the collectives copy on
// the cores the other half computes on).
//
// Data parallelism: once a stage's weight gradients are final on a rank (its last B or W),
// they (param_bytes_per_stage) are all-reduced over the DP group in buckets of
// bucket_bytes, each bucket a ring: 2(d-1)/d * bucket / bandwidth + 2(d-1) * latency. The
// reductions of one rank's stages queue on one channel, in the order their stages finish,
// and overlap whatever the pipeline still computes (CostModel::reduce): they slow neither
// compute nor the pipeline's messages, except where the costs place ranks on a shared
// device (CostModel::sharing: CPU collectives copy and add on the cores the ranks compute
// on), where a reduction is work on its rank's device. The step ends when the last
// reduction ends.
//
// Times: seconds, so the program's compute costs (CostModel) must be in seconds too.
//
// Pure functions; thread-compatible. Pure (no torch).
#ifndef CONVEYOR_SIM_MESH_COSTS_H_
#define CONVEYOR_SIM_MESH_COSTS_H_

#include <cstdint>
#include <vector>

#include "conveyor/mesh/mesh.h"
#include "conveyor/sim/mesh_network.h"
#include "conveyor/sim/simulator.h"

namespace conveyor {

// The gradient bytes of one data-parallel all-reduce in conveyor's trainer by default (the
// reducer's bucket, train/data_parallel_reducer.h; --dp-bucket): 4 MiB on the CPU (small
// buckets start reducing early, behind the backward), 25 MiB on GPUs (PyTorch DDP's: at
// dp 32 over InfiniBand, 4 MiB buckets made the published layouts latency-bound).
constexpr int64_t DefaultBucketBytes(bool gpu) { return gpu ? 25 << 20 : 4 << 20; }

// The sizes the mesh's communication depends on.
struct ModelShape {
  int64_t hidden = 4096;             // C
  int64_t seq_len = 2048;            // T
  int64_t micro_batch_size = 1;      // b, sequences per micro-batch on one DP replica
  int64_t layers_per_stage = 1;      // transformer blocks of one stage
  double element_bytes = 2;          // of an activation and of a gradient (bf16)
  double param_bytes_per_stage = 0;  // of one TP shard of a stage; 0: derived (see below)
  double bucket_bytes = DefaultBucketBytes(/*gpu=*/true);  // the DP all-reduce bucket
  bool full_recompute = false;  // the backward recomputes the forward (and its all-reduces)
  // Sequence parallelism: each all-reduce an all-gather and a reduce-scatter (the same bytes),
  // the backward's half again (it gathers the column-parallel inputs once more).
  bool sequence_parallel = false;
  // Context parallelism: each rank holds seq_len / cp of every sequence; attention_s is one
  // block's attention products on a rank in a forward (its queries over every key), what the
  // ring's messages hide under.
  int cp = 1;
  double attention_s = 0;
  double kv_share =
      1;  // the key-value heads' width over the model's (KV / H): what the ring carries
  // Expert parallelism: its ranks, and per stage the sparse blocks (empty: none).
  int ep = 1;
  int64_t experts = 0;
  int64_t top_k = 1;
  std::vector<int64_t> sparse_per_stage;

  // b * T * C * element_bytes / cp: one micro-batch's activation on a rank, the TP
  // all-reduce's payload.
  double activation_bytes() const;
  // param_bytes_per_stage, or when 0 the blocks' weights, 12 C^2 per block, split over tp:
  // 12 * C^2 * layers_per_stage * element_bytes / tp.
  double stage_param_bytes(int tp) const;
};

struct MeshSimResult {
  SimResult pipeline;           // tp_time in every F, I, B; reductions as timeline phases
  std::vector<double> tp_time;  // per pipeline rank: added to each F, I and B
  // Per pipeline rank: what a stage's ring attention leaves exposed in a forward, and in a
  // backward (empty: cp 1).
  std::vector<double> cp_forward, cp_backward;
  std::vector<double> ep_time;  // per stage: the all-to-alls added to each F (empty: ep 1)
  // The all-to-alls of one step on the pipeline rank that waits longest on them, before any
  // overlap hides them.
  double ep_comm = 0;
  std::vector<double> dp_time;  // per pipeline rank: one stage's gradients, all buckets
  int64_t dp_buckets = 0;       // buckets per stage
  double step_without_dp = 0;   // pipeline.makespan
  double step = 0;              // the step with the DP reductions: >= step_without_dp
  double dp_exposed = 0;        // step - step_without_dp
  // The reductions of all pipeline ranks, summed, and the share of that time that runs
  // before step_without_dp, hidden behind the pipeline (1 when dp_comm is 0).
  double dp_comm = 0;
  double dp_hidden_share = 1;
};

// Simulates `program` under `costs` (the compute of one stage on one rank, its 1/tp share)
// on `mesh` and `network` with the sizes of `shape`; see above. With tp = dp = 1 the
// pipeline result is Simulate(program, costs, options)'s.
// Throws UserError when mesh.pp() != program.layout.num_ranks(), the mesh does not fill
// whole nodes (CheckFitsNodes) or the experts' mesh cannot fold over it (Mesh::FoldExperts),
// and what Simulate throws.
// REQUIRES: the network's links and the shape's sizes valid (positive sizes, links as
// RingAllReduceTime requires).
MeshSimResult SimulateMesh(const Program& program, const CostModel& costs, const Mesh& mesh,
                           const MeshNetwork& network, const ModelShape& shape,
                           const SimOptions& options = {});

}  // namespace conveyor

#endif  // CONVEYOR_SIM_MESH_COSTS_H_
