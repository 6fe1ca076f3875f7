// The auto-planner: every way to lay a transformer out on `world` devices (dp x tp x pp, a
// schedule with its chunks per rank, the micro-batch count, recomputation none or full,
// ZeRO 0 or 1), priced and simulated, best first.
//
// Costs come from FLOP counts and stated device figures, for machines one does not have:
// per token, a block's forward is 2 x its parameters + 4 T C (the attention's two
// products, counted whole as Megatron's MFU does), the LM head's 2 C V; backward is twice
// the forward (input and weight halves equal), full recomputation adds one forward to it;
// divided by tp and by the device's rate (its peak x efficiency: measured costs are the
// next step). Blocks are split evenly over the pipeline's parts,
// the embedding with the first, the head with the last. Communication is SimulateMesh's
// (mesh_costs.h): Megatron's tensor-parallel all-reduces and the bucketed data-parallel
// reduction over the nodes' links.
//
// Memory per rank, a hard limit: weights, gradients and AdamW's moments at
// bytes_per_param (16: fp32 weights and gradients, two fp32 moments; ZeRO-1 shards the
// moments over dp: 8 + 8 / dp), over tp; activations at the schedule's peak in flight
// (PeakActivations), per micro-batch and block s b C (10 + 24 / tp) bytes in bf16 with fused
// attention (Korthikanti et al., "Reducing Activation Recomputation in Large Transformer
// Models", 2022, without sequence parallelism), 2 s b C with full recomputation, and the
// last stage's fp32 logits s b V 4. A candidate over the limit is never simulated.
//
// Not modelled yet: measured per-layer costs (the plan is only as good as --device-tflops),
// sequence parallelism, selective recomputation, interleaving beyond each schedule's
// default chunks, stage splits balanced by cost.
//
// Pure; thread-compatible.
#ifndef CONVEYOR_SIM_AUTO_PLANNER_H_
#define CONVEYOR_SIM_AUTO_PLANNER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "conveyor/sim/mesh_network.h"

namespace conveyor {

struct TransformerSpec {
  int64_t layers = 32;
  int64_t hidden = 4096;
  int64_t heads = 32;
  int64_t kv_heads = 0;      // 0: heads
  int64_t intermediate = 0;  // 0: 4 x hidden (GPT), 8/3 x hidden rounded up to 256 (gated)
  int64_t vocab = 50257;
  int64_t seq_len = 2048;
  bool gated_mlp = false;  // SwiGLU (Llama): three matrices of hidden x intermediate

  int64_t kv() const { return kv_heads > 0 ? kv_heads : heads; }
  int64_t mlp() const;
  double BlockParams() const;
  // Parameters of everything: blocks, embedding and an untied head.
  double Params() const;
  // A block's forward FLOPs per token.
  double BlockForwardFlops() const;
  // Model FLOPs per token of a training step (forward and backward, no recomputation).
  double TrainFlopsPerToken() const;
};

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
  double bytes_per_param = 16;
  int top = 5;
};

struct PlanCandidate {
  int dp = 1, tp = 1, pp = 1;
  std::string schedule;
  int chunks = 1;
  int microbatches = 1;
  int64_t micro_batch_size = 1;  // sequences per micro-batch
  bool recompute = false;
  int zero = 0;
  double step_s = 0;
  double tokens_per_s = 0;
  double mfu = 0;         // model FLOPs / (world x device_flops x step)
  double bubble = 0;      // the pipeline's, SimResult::bubble_fraction
  double peak_bytes = 0;  // the fullest rank's
  double tp_comm_s = 0;   // per F/I/B of the slowest pipeline rank's stages
  double dp_exposed_s = 0;
  bool tp_across_nodes = false;
  std::string held_back;  // for those after the best: what costs them against it
};

struct AutoPlan {
  // At most `top`, fastest first (at equal speed: less ZeRO, then less memory). At pp 1 the
  // schedules do not differ: only the first of the list is tried.
  std::vector<PlanCandidate> best;
  int64_t layouts = 0;      // (dp, tp, pp, schedule, chunks, micro-batches) tried
  int64_t over_memory = 0;  // candidates refused for memory (never simulated)
  int64_t simulated = 0;
  PlanCandidate smallest_over;  // the candidate that missed the limit by least, when none fit
};

// UserError naming the value when the request cannot be planned (world, sizes, a schedule
// name, no layout at all).
AutoPlan PlanAuto(const AutoPlanRequest& request);

}  // namespace conveyor

#endif  // CONVEYOR_SIM_AUTO_PLANNER_H_
