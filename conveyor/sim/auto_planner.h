// The auto-planner: every way to lay a transformer out on `world` devices (dp x tp x pp, for
// a Mixture-of-Experts model the expert-parallel size, a schedule with its chunks per rank,
// the micro-batch count, the stage split, recomputation none, selective or full, ZeRO 0 or
// 1), priced and simulated, best first.
//
// A layer's costs come from FLOP counts and stated device figures (device_flops x efficiency)
// or from a LayerCostTable measured on this machine (`conveyor profile`): EstimateLayerCosts
// (layer_cost_model.h) says how, under each recomputation, tp, cp and sequence parallelism.
// After a rank's last action come AdamW's step (measured costs only) and, for schedules
// that keep a copy of each part on two ranks (DualPipe), the all-reduce of the copies'
// fp32 gradients over the intra-node link.
// Full recomputation keeps a stage's input (b T C) per micro-batch in flight, runs the
// forward again before the backward and, for that micro-batch, holds the stage's whole
// activations once; where I and W run apart (the zero-bubble schedules), what W needs stays
// from I until W (recomputed or kept alike).
//
// The stage split is Partition (partition.h) of the layers' F + I + W: the embedding and the
// head are layers, so the first and last stages take fewer blocks when they are heavy.
// Communication is SimulateMesh's (mesh_costs.h): Megatron's tensor-parallel all-reduces, the
// experts' all-to-alls (ep > 1) and the bucketed data-parallel reduction over the nodes' links
// (on one host, DualPipe's sums that run at once share its bandwidth; the experts'
// gradients, reduced over dp / ep replicas, priced as if over dp). Expert parallelism folds
// over the data-parallel ranks (ep divides dp and the experts; tp 1: the trainer's rule), and
// a rank computes, on average, what it would at ep 1: its tokens' share of every expert's
// work, the experts' load assumed even. Where the runtime runs DualPipe's pairs at once
// (AutoPlanRequest::pairs_at_once), a pair's all-to-alls hide under its other half's
// compute as far as the simulation finds (not where the ranks share one machine's cores). Where the
// ranks share one machine's compute (shared_compute), the simulator runs each pipeline rank's
// computes, and its DP reductions, under processor sharing (compute_sharing.h).
//
// Memory per rank, a hard limit: weights, gradients and AdamW's moments at bytes_per_param
// (16: fp32 weights and gradients, two fp32 moments; ZeRO-1 shards the moments over dp:
// 8 + 8 / dp), over tp; a sparse block's experts over ep (their moments under ZeRO-1 over
// their dp / ep replicas: 8 + 8 ep / dp); the activations in flight, followed through the rank's
// actions (measured ones under TP: 24 of a block's 34 parts split, the rest whole, after
// Korthikanti et al.); during a forward, its transients (under full recomputation, those of a
// forward without autograd); during a backward, its workspace: the most that stage's layers
// allocate while their backward runs (measured; from FLOP counts, their activations again)
// and the next micro-batch's input. After a stage's backward, its activations gone, come
// with dp > 1 the reducer's flat copy of one bucket of gradients (at most
// AutoPlanRequest::bucket_bytes) and the ring's parts of it in flight, and with copies of each part
// (DualPipe) the sum of their gradients (flat, the transport's buffer, copied back: three
// times the rank's gradients, as measured): the rank holds the larger of those and its
// activations; so it does of AdamW's temporaries (measured; none from FLOP counts: a fused
// optimizer) and of the held-out evaluation's forward (training's micro-batches, keeping no
// activations). A candidate over the limit is never simulated.
//
// Context parallelism (cp > 1 where AutoPlanRequest::context_parallel): a rank computes and
// holds what b / cp sequences take (attention's work balanced by the split), its blocks' ring
// messages hidden under their attention (a block's share of FLOPs 4 T C of its forward's) as
// far as SimulateMesh finds; the DP reduction over dp x cp.
//
// Sequence parallelism (tp > 1, tried with and without): every activation of a block, the
// embedding's output and a stage's input over tp (s b C 34 / tp, Korthikanti et al.; measured
// ones: the whole layer's over tp), the TP traffic of a backward 3/2 of its forward's (the
// column-parallel inputs gathered again: SimulateMesh).
//
// Not modelled: the experts' uneven load.
//
// Pure; thread-compatible.
#ifndef CONVEYOR_SIM_AUTO_PLANNER_H_
#define CONVEYOR_SIM_AUTO_PLANNER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "conveyor/partition/partition.h"
#include "conveyor/schedule/program.h"
#include "conveyor/sim/layer_cost_table.h"
#include "conveyor/sim/mesh_costs.h"
#include "conveyor/sim/mesh_network.h"
#include "conveyor/sim/recompute.h"
#include "conveyor/sim/transformer_spec.h"

namespace conveyor {

struct AutoPlanRequest {
  TransformerSpec model;
  int world = 8;
  int64_t global_batch = 512;    // sequences per step
  double device_flops = 312e12;  // the device's peak rate (A100 bf16 by default)
  double efficiency = 0.5;       // the share of it that a layer's matrix work reaches
  double memory_per_rank = 80e9;
  MeshNetwork network;                 // ranks_per_node: GPUs per node (0: one node)
  std::vector<std::string> schedules;  // empty: every schedule
  int max_microbatches = 128;
  // Chunks per rank tried for the schedules that take a choice of them (interleaved 1F1B,
  // looped BFS, interleaved ZB): from their default (2) to this, while the pipeline's parts
  // (pp x chunks) do not outnumber the model's layers.
  int max_chunks = 4;
  double bytes_per_param = 16;
  // The data-parallel reducer's bucket (its count prices the DP all-reduces' latencies, its
  // copy takes memory): the trainer's default on GPUs unless told.
  double bucket_bytes = DefaultBucketBytes(/*gpu=*/true);
  int top = 5;
  std::optional<LayerCostTable> measured;  // else FLOP counts at device_flops x efficiency
  // > 0: every rank of the world computes on one machine that runs this many of them at full
  // speed (a CPU's cores over each rank's threads); 0: a device of its own each. With a
  // measured table: with all its ranks busy at its largest size, and at a candidate's
  // micro-batch size and each count of busy ranks in proportion to the table's capacity
  // there.
  double shared_compute = 0;
  int dp = 0, tp = 0, pp = 0, ep = 0, cp = 0;  // > 0: only layouts of that size on the axis
  // The model splits its sequences over context-parallel ranks (conveyor's: a Llama without
  // experts): cp > 1 is tried, each dividing the world and 2 cp the sequence.
  bool context_parallel = false;
  // The runtime runs an OVERLAP_F_B action's halves at once (conveyor's executor on the CPU
  // at tp 1: PipelineModel::overlaps_pairs), so that one half's all-to-alls may hide under
  // the other's compute; else one after the other.
  bool pairs_at_once = false;
  // A pipeline hop's latency (< 0: the intra-node link's); local ranks hand activations over
  // shared memory, far faster than their collectives.
  double hop_s = -1;
  // All-reduces over the whole world each step outside the pipeline (conveyor's trainer: the
  // loss, the gradient norm, the step's report), of a few bytes each over the slowest link.
  int step_collectives = 3;
};

struct PlanCandidate {
  int dp = 1, tp = 1, pp = 1;
  int ep = 1;                      // expert-parallel ranks (folded over dp)
  int cp = 1;                      // context-parallel ranks
  bool sequence_parallel = false;  // with tp > 1
  std::string schedule;
  int chunks = 1;
  int microbatches = 1;
  int64_t micro_batch_size = 1;  // sequences per micro-batch
  Recompute recompute = Recompute::kNone;
  std::string stage_layers;  // layers per stage, the embedding and head counted: "1,3,3,1"
  int zero = 0;
  double step_s = 0;
  double tokens_per_s = 0;
  double mfu = 0;         // model FLOPs / (world x device_flops x step); -1 with measured costs
  double bubble = 0;      // the pipeline's, SimResult::bubble_fraction
  double peak_bytes = 0;  // the fullest rank's
  double tp_comm_s = 0;   // per F/I/B of the slowest pipeline rank's stages
  double dp_exposed_s = 0;
  double ep_comm_s = 0;  // a step's all-to-alls on the rank that waits longest, before overlap
  double cp_comm_s = 0;  // a stage's forward and backward ring time exposed, slowest rank
  bool tp_across_nodes = false;
  std::string held_back;  // for those after the best: what costs them against it
};

struct AutoPlan {
  // At most `top`, fastest first (at equal speed: less ZeRO, no recomputation, then less
  // memory). At pp 1 the
  // schedules do not differ: only the first of the list is tried.
  std::vector<PlanCandidate> best;
  int64_t layouts = 0;      // (dp, tp, pp, schedule, chunks, micro-batches) tried
  int64_t over_memory = 0;  // candidates refused for memory (never simulated)
  int64_t simulated = 0;
  PlanCandidate smallest_over;  // the candidate that missed the limit by least, when none fit
};

// Plans for ranks that share one CPU of `cores` cores: shared_compute from the measured
// table's capacity with all its ranks busy (scaled to `cores`; `cores` itself without a
// table; the table's capacity at each busy count in proportion), pipeline hops over
// shared memory (kLocalHopSeconds) and, unless the request states others, the local link
// (LocalCpuLink) for the collectives and Gloo's (LocalGlooLink) for the all-to-alls.
// Precondition: cores > 0.
void ShareOneCpu(AutoPlanRequest& request, double cores);

// Plans for ranks as threads of one process sharing one GPU (train --rank-threads on one
// GPU): shared_compute the capacity the measured table found for its ranks, pipeline hops
// and, unless the request states another link, collectives inside the process
// (kLocalGpuHopSeconds, LocalGpuLink), and tp 1: libtorch runs a GPU's backwards on one
// thread, where tensor-parallel ranks sharing it as threads would wait for each other
// forever. UserError unless the request has a table measured on a GPU, or for request.tp > 1.
void ShareOneGpu(AutoPlanRequest& request);

// UserError naming the value when the request cannot be planned (world, sizes, a schedule
// name, no layout at all). Prices every layout of ForEachPlanLayout under each of
// PlannedRecomputes with one CandidatePricer.
AutoPlan PlanAuto(const AutoPlanRequest& request);

// "no layout fits 1.0 GiB a rank: the smallest need is ... (the layout)", for a plan with
// no best.
std::string NoLayoutFits(const AutoPlanRequest& request, const AutoPlan& plan);
// A candidate's mesh: "2 x 1 x 4" (dp x tp x pp), "2 x 1 x 4, ep 2" with experts spread.
std::string MeshSizes(const PlanCandidate& candidate);

// One layout the planner tries: the mesh, a schedule with its chunks per rank, the
// micro-batch count and size, and the schedule's program for them.
struct PlanLayout {
  int dp = 1, tp = 1, pp = 1;
  int ep = 1;                 // of a Mixture-of-Experts model: dividing dp and the experts
  int cp = 1;                 // context-parallel ranks
  std::string_view schedule;  // a name of the schedule registry
  int chunks = 1;
  int microbatches = 1;
  int64_t micro_batch_size = 1;  // sequences: global_batch / dp / microbatches
  Program program;
};

// Calls `visit` with every layout `request` allows, in this order: tp (dividing the world and
// a node's ranks, splitting the model's blocks), pp (dividing the rest, at most the layers
// + 2), the schedules (at pp 1 only the first: one rank runs them alike), the chunks per rank
// (AutoPlanRequest::max_chunks), the micro-batch counts dividing a replica's batch (up to
// max_microbatches), and for a Mixture-of-Experts model ep (dividing dp and the experts; else
// 1), each ep with the same program, and where the model splits its sequences each cp (dividing
// the world / (tp x pp), 2 cp dividing the sequence); dp = world / (cp x tp x pp) divides the
// global batch, and the
// request's dp, tp, pp and ep, where set, hold. Skips a layout outside its schedule's
// preconditions or with more parts (stages in pipeline order) than the layers + 2. Returns how
// many it visited (AutoPlan::layouts). UserError naming the value when the request cannot be
// planned (its sizes, an unknown schedule).
int64_t ForEachPlanLayout(const AutoPlanRequest& request,
                          const std::function<void(const PlanLayout&)>& visit);

// The recomputations tried for every layout, in this order: none, selective (only with
// measured costs: from FLOP counts fused attention keeps no scores) and full.
std::vector<Recompute> PlannedRecomputes(const AutoPlanRequest& request);

// A layout under one recomputation, priced: `candidate` has its layout, split and peak memory
// (with the first ZeRO stage that fits; when none does, with the last tried: ZeRO-1 where
// dp > 1) and, when it `fits`, its ZeRO stage and what the simulation says (held_back empty).
struct PricedCandidate {
  PlanCandidate candidate;
  bool fits = false;
};

// Prices the candidates of one request: its stage split (Partition of the layers' costs,
// the costly part, reused for every layout of the same parts, tp, micro-batch size and
// recomputation), its memory and, when it fits, its simulated step. Holds a reference to
// the request, which must outlive it. Thread-compatible.
class CandidatePricer {
 public:
  // UserError as ForEachPlanLayout when the request cannot be planned.
  explicit CandidatePricer(const AutoPlanRequest& request);

  // `layout`: one that ForEachPlanLayout(request) visits; `sequence_parallel` only with tp > 1.
  PricedCandidate Price(const PlanLayout& layout, Recompute recompute,
                        bool sequence_parallel = false);

 private:
  const AutoPlanRequest& request_;
  int per_node_ = 1;
  double tokens_per_step_ = 0;
  double optimizer_bytes_per_param_ = 0;  // AdamW's temporaries beside its state
  Link copies_link_;                      // where DualPipe's copies sum their gradients
  double step_collectives_s_ = 0;         // the step's all-reduces outside the pipeline
  std::map<std::tuple<int, int, int, int64_t, Recompute>, std::vector<LayerRange>> splits_;
};

}  // namespace conveyor

#endif  // CONVEYOR_SIM_AUTO_PLANNER_H_
