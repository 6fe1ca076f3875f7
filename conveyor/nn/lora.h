// Low-rank adapters (LoRA: Hu et al. 2021, "LoRA: Low-Rank Adaptation of Large Language
// Models") on a model's linear projections. A projection y = x W^T (W (out, in), frozen) with
// an adapter of rank r computes
//
//   y = x W^T + s (x A^T) B^T        A (r, in), B (out, r), s = alpha / r
//
// and only A and B train. A starts Kaiming-uniform (bounds +-1 / sqrt(in), from its own stream
// TensorInitGenerator(seed, name): any split builds the same values), B zeros: the first
// forward equals the base model's exactly. Their names are the projection's with
// ".lora_A.weight" / ".lora_B.weight" in place of ".weight" (PEFT's, without its
// "base_model.model." prefix and adapter name): model.layers.0.self_attn.q_proj.lora_A.weight.
//
// Tensor parallelism over p ranks (tensor_parallel.h) splits an adapter as its base:
//   column-parallel base (W rows split): A (r, in) replicated, its product joins the base's
//     ColumnParallelLinears (so x's gradient through it is summed over the group like the
//     base's); B (out / p, r) split by rows as W. Each rank's gradient of A covers only its
//     rows of B: A's gradient is summed over tp x dp (ReplicatedSpec(true)).
//   row-parallel base (W columns split): A (r, in / p) split by columns as W, B (out, r)
//     replicated; each rank's partial x_r A_r^T B^T joins its partial x_r W_r^T before the
//     group's sum (ReduceOutOfTensorParallel), so B's gradient on a rank covers only its
//     partial product: summed over tp x dp too.
// The adapters' products go through Linear / ColumnParallelLinears, so their weight
// gradients are deferred as any weight's (split backward, Zero Bubble's W); a frozen weight
// (requires_grad false) gets no gradient at all (WeightGradOrDefer).
//
// Not here: dropout on the adapters' input; adapters on Mixture-of-Experts weights.
#ifndef CONVEYOR_NN_LORA_H_
#define CONVEYOR_NN_LORA_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "conveyor/module/stage_module.h"
#include "conveyor/nn/tensor_parallel.h"

namespace conveyor {

struct LoraConfig {
  int rank = 8;       // r
  double alpha = 16;  // the update's scale is alpha / r
  // The projections adapted, by their names in a decoder layer ("q_proj", "down_proj", ...).
  std::vector<std::string> targets;

  double scale() const { return alpha / rank; }
  bool Targets(std::string_view projection) const;
};

// The projections a Llama decoder layer has adapters for, in its order: q_proj, k_proj,
// v_proj, o_proj, gate_proj, up_proj, down_proj.
const std::vector<std::string>& LoraTargetNames();
// The targets when none are named: the attention's four projections.
std::vector<std::string> DefaultLoraTargets();

// `text` ("q_proj,v_proj"; "" = DefaultLoraTargets) as a list of targets. UserError naming
// `name` (the flag or the file and key) and the word that names no projection of
// LoraTargetNames, or a target named twice.
std::vector<std::string> ParseLoraTargets(std::string_view text, std::string_view name);

// Whether `name` is an adapter's parameter (".lora_A." or ".lora_B." in it).
bool IsLoraParameter(std::string_view name);

// The adapters' parameter names of the projection whose weight is `weight_name`
// ("model.layers.0.self_attn.q_proj.weight").
std::string LoraAName(std::string_view weight_name);
std::string LoraBName(std::string_view weight_name);

// The adapter of one projection, or none (default-constructed).
class LoraAdapter {
 public:
  LoraAdapter() = default;
  // The adapter of the projection `weight_name` of full shape (out, in), laid out over tp as
  // its base (`row_parallel`: the base's columns split; else its rows, as `base_spec` says:
  // ColumnParallel or KeyValueParallel(1)); declares A and B in `specs`. A is drawn and B
  // zeros whatever `init` says (a base folder read into undrawn weights has no adapters), but
  // for kShapesOnly (on the meta device).
  LoraAdapter(const std::string& weight_name, int64_t out, int64_t in, bool row_parallel,
              const ParameterSpec& base_spec, const LoraConfig& config, uint64_t seed,
              const TensorParallel& tp, ParameterSpecs& specs, WeightInit init);

  bool defined() const { return a_.defined(); }
  // A and B by name; empty when none.
  NamedTensors NamedParameters() const;
  const at::Tensor& a() const { return a_; }  // (r, in) or (r, in / p) row-parallel
  const at::Tensor& b() const { return b_; }  // (out / p, r) or (out, r) row-parallel
  double scale() const { return scale_; }

 private:
  std::string weight_name_;
  at::Tensor a_, b_;
  double scale_ = 0;
};

// ColumnParallelLinears(x, linears, tp), each linears[i] plus adapters[i]'s update when that
// is defined (adapters.size() == linears.size(); null: none): (n, T, out_i / p).
std::vector<at::Tensor> LoraColumnParallelLinears(const at::Tensor& x,
                                                  const std::vector<ColumnLinear>& linears,
                                                  const std::vector<const LoraAdapter*>& adapters,
                                                  const TensorParallel& tp);

// RowParallelLinear(x, weight, {}, tp) plus the adapter's update when defined:
// x (n, T, in / p) -> (n, T, out) replicated (or this rank's positions under sequence
// parallelism).
at::Tensor LoraRowParallelLinear(const at::Tensor& x, const at::Tensor& weight,
                                 const LoraAdapter& adapter, const TensorParallel& tp);

// The merged weight W + scale B A of whole tensors: weight (out, in), a (r, in), b (out, r).
at::Tensor MergeLora(const at::Tensor& weight, const at::Tensor& a, const at::Tensor& b,
                     double scale);

}  // namespace conveyor

#endif  // CONVEYOR_NN_LORA_H_
