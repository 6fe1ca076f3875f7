// The auto-planner's (auto_planner.h) costs of a transformer's layers (the embedding, the
// blocks, the head) for one micro-batch on one rank of a layout: their times, the
// activation bytes they hold and allocate, their parameters and their inputs. (Not the
// trainer's per-layer weights for its stage split: train/layer_costs.h.)
//
// A layer's costs come from one of two sources:
//  - FLOP counts and stated device figures, for machines one does not have: per token, a
//    block's forward is 2 x its parameters + 4 T C (the attention's two products, counted
//    whole as Megatron's MFU does), the LM head's 2 C V, the embedding's nothing; backward
//    is twice the forward (input and weight halves equal); all over tp and the device's rate
//    (its peak x efficiency). Activations per micro-batch and block s b C (10 + 24 / tp)
//    bytes in bf16 with fused attention (Korthikanti et al., "Reducing Activation
//    Recomputation in Large Transformer Models", 2022, without sequence parallelism; fused
//    attention keeps no scores, so selective recomputation buys nothing and is not tried),
//    the head's fp32 logits s b V 4. What W needs from I on (the linear layers' inputs and
//    output gradients): s b C (8 + 24 / tp) a block, the logits' gradient for the head.
//    A sparse block (Mixture-of-Experts) computes the parameters a token meets (its router,
//    top_k experts, the shared one: TransformerSpec::BlockForwardFlops) and holds beside a
//    dense block's what its wider MLP adds: 4 bytes a unit and token for the units beyond
//    the dense MLP's (top_k experts' and the shared one's), the top_k - 1 more copies of its
//    input (s b C 2 each) and its router's scores (s b E 8).
//  - A LayerCostTable measured on this machine (`conveyor profile`): the forward,
//    backward-input and backward-weight seconds, the activation bytes and what W holds of
//    the embedding, a block (also under selective recomputation, never faster than without
//    it) and the head, piecewise linear in the micro-batch's sequences through the sizes
//    timed; a tensor-parallel shard as measured where the table has that tp, else the whole
//    layer's times and bytes over tp (of a block's activations 24 of 34 parts split, the rest
//    whole, after Korthikanti et al.; of what W needs 24 of 32). A Mixture-of-Experts
//    model's sparse blocks as their own kind, timed at ep 1.
// Full recomputation: F keeps nothing (a forward without autograd where the table timed
// one), and the backward runs the forward again first (I, or B, takes F's time more).
//
// Context parallelism (cp > 1): a rank computes and holds what sequences / cp take.
// Sequence parallelism (tp > 1): every activation of a block, the embedding's output and a
// stage's input over tp (s b C 34 / tp, Korthikanti et al.; measured ones: the whole
// layer's over tp).
//
// Pure; thread-compatible.
#ifndef CONVEYOR_SIM_LAYER_COST_MODEL_H_
#define CONVEYOR_SIM_LAYER_COST_MODEL_H_

#include <cstdint>
#include <vector>

#include "conveyor/sim/layer_cost_table.h"
#include "conveyor/sim/recompute.h"
#include "conveyor/sim/transformer_spec.h"

namespace conveyor {

// One micro-batch on one rank: the layout's sizes that change a layer's costs.
struct LayerCostLayout {
  int tp = 1;             // tensor-parallel ranks; a Mixture-of-Experts model's only at 1
  int cp = 1;             // context-parallel ranks
  int64_t sequences = 1;  // the micro-batch's, before context parallelism splits them
  Recompute recompute = Recompute::kNone;
  bool sequence_parallel = false;  // only with tp > 1
};

// The costs of the model's layers, in order: the embedding, the blocks, the head
// (model.layers + 2 entries in each vector).
struct LayerCostEstimate {
  // Their times and bytes (backward_s filled in: input_s + weight_s where the source has
  // none), under the layout's recomputation.
  std::vector<LayerSample> layers;
  std::vector<double> params;         // per layer, one TP shard's (of a sparse block, at ep 1)
  std::vector<double> expert_params;  // per layer, of those its experts' (0 but sparse blocks)
  // A micro-batch's input to the layer (0 for the embedding), kept under full recomputation.
  std::vector<double> input_bytes;
};

// The costs of `model`'s layers for `layout`: from `measured` where it is not null (a table
// of `model`'s layers), else from FLOP counts at `flop_rate` (one device's: its peak x the
// share of it a layer's matrix work reaches).
LayerCostEstimate EstimateLayerCosts(const TransformerSpec& model, const LayerCostTable* measured,
                                     double flop_rate, const LayerCostLayout& layout);

}  // namespace conveyor

#endif  // CONVEYOR_SIM_LAYER_COST_MODEL_H_
