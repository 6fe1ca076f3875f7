// A Mixture-of-Experts MLP block (Shazeer et al., 2017; Switch, Fedus et al., 2021; as
// Mixtral, Qwen-MoE and DeepSeek-V3 use it): a router sends each token to k of E SwiGLU
// experts and sums their outputs weighted by its gates, beside an optional shared expert
// every token passes through.
//
//   x (N, C) tokens, normalised
//   logits = x W_r^T                (N, E)  in fp32 whatever the compute dtype
//   scores = softmax(logits)        (N, E)  or sigmoid(logits) (DeepSeek-V3)
//   chosen = top-k of scores + b    (N, k)  b: the selection bias (zeros unless balancing
//                                           without an auxiliary loss); it only chooses
//   gates  = scores at chosen       (N, k)  divided by their sum when `renormalize`
//                                           (Mixtral; Qwen's norm_topk_prob)
//   y      = sum_j gates_j expert_{chosen_j}(x)
//            + shared(x) [x sigmoid(x w_g) when the shared expert is gated (Qwen2-MoE)]
//   expert(x) = W_down (silu(W_gate x) * W_up x)       W_gate, W_up (F, C), W_down (C, F)
//
// Dropless by default: every token reaches its k experts, however uneven the load; with a
// capacity factor, copies beyond an expert's capacity are dropped (Switch).
//
// Load balancing, per layer and micro-batch (as Megatron-Core counts it; Hugging Face's
// Mixtral takes one loss over every layer's router outputs at once):
//   "load_balance": aux_loss_coef x E x sum_i f_i P_i, f_i the tokens sent to expert i over
//     N (they sum to k over i, as Hugging Face's load_balancing_loss_func counts them), P_i
//     the mean over tokens of expert i's probability (the scores, each token's normalised to
//     sum 1 under sigmoid);
//   "router_z": z_loss_coef x mean over tokens of logsumexp(logits)^2 (ST-MoE, Zoph et al.);
//   both attached to the output (module/auxiliary_loss.h) when their coefficient is > 0.
//   Without an auxiliary loss (DeepSeek-V3's auxiliary-loss-free balancing): after each
//   optimizer step, UpdateSelectionBias moves b_i by bias_rate x sign(mean load - load_i),
//   the loads being the tokens each expert received in the step's counted forwards.
//
// Parameters, under `prefix` and Hugging Face's names (`names`: Qwen-MoE's and OLMoE's
// "gate" / "experts.i.gate_proj|up_proj|down_proj", Mixtral's "gate" / "experts.i.w1|w3|w2"):
//   PREFIX.gate.weight                     (E, C)   the router
//   PREFIX.experts.i.gate_proj.weight      (F, C)   expert i's, i in [0, E)
//   PREFIX.experts.i.up_proj.weight        (F, C)
//   PREFIX.experts.i.down_proj.weight      (C, F)
//   PREFIX.shared_expert.gate_proj|up_proj|down_proj.weight   (S, C) (S, C) (C, S)
//   PREFIX.shared_expert_gate.weight       (1, C)
// Every matrix drawn N(0, init_std) from its own stream (TensorInitGenerator(seed, name)).
// The experts' weights are declared ExpertWeight (parameter_spec.h: their gradients summed
// over the experts' data-parallel group), the router's and the shared expert's are ordinary
// (under tp > 1: summed over the TP ranks too).
//
// Tensor parallelism (tp > 1): each TP rank routes its positions [r T/tp, (r+1) T/tp) of every
// sequence through the whole block (its router and shared expert replicated, its experts
// those of its expert-parallel rank, which may be a TP rank: Mesh::FoldExperts), as
// Megatron-Core's MoE layer does under sequence parallelism. Under sequence parallelism the
// block's input and output are those positions, (n, T/tp, C); otherwise the input is
// replicated, the rank takes its positions (TokensOfTensorParallelRank) and the outputs are
// gathered again (TokensOfEveryTensorParallelRank). The token counts, the auxiliary losses' sums
// and the dropped copies are summed over the TP ranks, so they are the micro-batch's; a capacity
// counts a rank's tokens. Tokens that do not split over tp (a generated one) are routed whole on
// every TP rank, without gradients.
//
// Expert parallelism (ExpertParallel, parallel_context.h): each of the ep ranks holds E / ep
// experts; after routing, each rank sends every token copy to the rank holding its expert
// and receives the copies the others route to its experts (one all-to-all of the counts,
// one of the rows, variable splits), runs its experts, and sends the outputs back (the
// reverse exchange; both differentiate into their reverse). The router and the shared
// expert are on every rank. Every rank of the group must run the same forwards and
// backwards in the same order.
//
// Thread-safety: one block, one thread at a time (its stage's).
#ifndef CONVEYOR_NN_MOE_MLP_H_
#define CONVEYOR_NN_MOE_MLP_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "conveyor/module/stage_module.h"
#include "conveyor/nn/parallel_context.h"
#include "conveyor/nn/parameter_spec.h"

namespace conveyor {

enum class RouterScoring : uint8_t { kSoftmax, kSigmoid };
// Which copies an expert over its capacity drops: those of the lowest gates, or the last in
// token order.
enum class TokenDrop : uint8_t { kProbability, kPosition };

struct MoeConfig {
  int hidden = 64;           // C
  int experts = 8;           // E
  int top_k = 2;             // k, in [1, E]
  int expert_units = 64;     // F: each expert's SwiGLU units
  int shared_units = 0;      // S: the shared expert's units; 0 = none
  bool shared_gate = false;  // the shared expert's output scaled by sigmoid(x w_g)
  RouterScoring scoring = RouterScoring::kSoftmax;
  bool renormalize = true;  // the k gates divided by their sum
  // Dropless (0), or each expert takes at most ceil(capacity_factor x N k / E) of the N k
  // token copies of a micro-batch on a rank, dropping the rest by `drop_by` (a dropped copy
  // adds nothing to its token's output).
  double capacity_factor = 0;
  TokenDrop drop_by = TokenDrop::kProbability;
  double aux_loss_coef = 0;  // Switch load-balancing loss; 0 = none
  double z_loss_coef = 0;    // router z-loss; 0 = none
  double bias_rate = 0;      // auxiliary-loss-free balancing's step; 0 = no selection bias
  double init_std = 0.02;
  WeightInit weights = WeightInit::kDrawn;  // or undrawn, to be read from a checkpoint
  // Mixtral's expert names: w1 (gate), w3 (up), w2 (down).
  bool mixtral_names = false;
};

// UserError naming the value unless every size is >= 1 (shared_units >= 0), top_k <= experts,
// the coefficients and the rate >= 0 and finite.
void CheckMoeConfig(const MoeConfig& config);

// The parameters of a block under `prefix` ("model.layers.3.mlp"), with their shapes, in the
// order NamedParameters lists them.
using NamedShapes = std::vector<std::pair<std::string, std::vector<int64_t>>>;
NamedShapes MoeParameterShapes(const MoeConfig& config, const std::string& prefix);

// The expert whose weight `name` is ("<block>.experts.<e>.<weight>": e); -1 for a name of
// no expert.
int ExpertOfName(std::string_view name);
// The expert weight `name` (ExpertOfName >= 0) as expert e's: the same weight of another.
std::string WithExpert(std::string_view name, int e);

class MoeMlp {
 public:
  // Creates the parameters (declared in `specs`), drawn from `seed`: the router and the
  // shared expert, and of the experts this rank's share under `ep` (every expert with
  // ep.size 1); the tokens split over `tp`. UserError when ep.size does not divide the
  // experts.
  MoeMlp(const MoeConfig& config, const std::string& prefix, uint64_t seed, ParameterSpecs& specs,
         const ExpertParallel& ep = {}, const TensorParallel& tp = {});

  // x (n, T, C) -> (n, T, C). Attaches the configured auxiliary losses to the output; adds
  // the tokens each expert received to load() when the forward counts
  // (AuxiliaryLossesCounted).
  at::Tensor Forward(const at::Tensor& x);

  // The router, this rank's experts (by their global names) and the shared expert, in
  // MoeParameterShapes' order.
  const NamedTensors& NamedParameters() const { return params_; }

  // Its parameters' common prefix ("model.layers.3.mlp"): the block's name in reports.
  const std::string& prefix() const { return prefix_; }
  const MoeConfig& config() const { return config_; }
  // Tokens each expert received in the counted forwards since the last ResetLoad, (E) int64.
  const at::Tensor& load() const { return load_; }
  // Token copies dropped over capacity in the same forwards.
  int64_t dropped() const { return dropped_; }
  void ResetLoad();
  // The selection bias b (E) fp32: zeros until updated.
  const at::Tensor& selection_bias() const { return bias_; }
  // b_i += bias_rate x sign(mean(load) - load_i), for `load` (E) summed over whatever ranks
  // share the experts' data (the data-parallel replicas). Precondition: bias_rate > 0.
  void UpdateSelectionBias(const at::Tensor& load);
  // Sets the selection bias (a checkpoint's): `bias` (E), any floating dtype. UserError for
  // another shape.
  void RestoreSelectionBias(const at::Tensor& bias);

 private:
  // x (M, C) -> (M, C): one SwiGLU expert of weights w[0..2] (gate, up, down).
  static at::Tensor Expert(const at::Tensor& x, const at::Tensor& gate, const at::Tensor& up,
                           const at::Tensor& down);

  // rows (M, C) sorted by this rank's experts, counts[l] of them for its l-th -> their
  // outputs (M, C), in the same order.
  at::Tensor LocalExperts(const at::Tensor& rows, const std::vector<int64_t>& counts);
  // sorted (N k, C): this rank's token copies sorted by global expert, counts (E) of them for
  // each -> the experts' outputs (N k, C) in the same order: computed here (ep.size 1), or
  // sent to the ranks holding the experts and back (expert_dispatch.h; collective over
  // ep.group).
  at::Tensor RunExperts(const at::Tensor& sorted, const at::Tensor& counts);

  MoeConfig config_;
  std::string prefix_;
  ExpertParallel ep_;
  TensorParallel tp_;
  int first_expert_ = 0;  // the global index of this rank's first expert
  NamedTensors params_;
  at::Tensor router_;                         // (E, C)
  std::vector<at::Tensor> gate_, up_, down_;  // this rank's E / ep of (F, C), (F, C), (C, F)
  at::Tensor shared_gate_proj_, shared_up_, shared_down_;  // (S, C), (S, C), (C, S)
  at::Tensor shared_gate_;                                 // (1, C)
  at::Tensor bias_;                                        // (E) fp32, not trained
  at::Tensor load_;                                        // (E) int64
  int64_t dropped_ = 0;
};

}  // namespace conveyor

#endif  // CONVEYOR_NN_MOE_MLP_H_
