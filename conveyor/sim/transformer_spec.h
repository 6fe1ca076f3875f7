// A transformer's sizes as the planner prices it (layers, hidden, heads, key-value heads, MLP
// units, vocabulary, sequence length, gated or not, Mixture-of-Experts blocks), and what
// follows from them: parameter counts and FLOPs per token.
//
// Pure; a plain value.
#ifndef CONVEYOR_SIM_TRANSFORMER_SPEC_H_
#define CONVEYOR_SIM_TRANSFORMER_SPEC_H_

#include <cstdint>
#include <vector>

namespace conveyor {

// The MLP units of a gated (SwiGLU) block when its configuration does not say: 8/3 of
// `hidden` rounded up to a multiple of 8 (10928 for 4096). What `train --model llama` builds
// and `plan --auto` prices; give the width (--intermediate) to match a model that rounds
// otherwise (Llama 2 7B's 11008 rounds to 256).
int64_t GatedMlpUnits(int64_t hidden);

struct TransformerSpec {
  int64_t layers = 32;
  int64_t hidden = 4096;
  int64_t heads = 32;
  int64_t kv_heads = 0;      // 0: heads
  int64_t intermediate = 0;  // 0: 4 x hidden (GPT), GatedMlpUnits(hidden) (gated)
  int64_t vocab = 50257;
  int64_t seq_len = 2048;
  bool gated_mlp = false;  // SwiGLU (Llama): three matrices of hidden x intermediate
  // Mixture-of-Experts (nn/moe_mlp.h), experts > 0: a sparse block's MLP is a router (hidden
  // x experts), `experts` SwiGLU experts of `expert_units` each (0: mlp()), `top_k` of them a
  // token, and a shared expert of `shared_units` (0: none) with its gate (hidden x 1).
  int64_t experts = 0;
  int64_t top_k = 0;
  int64_t expert_units = 0;
  int64_t shared_units = 0;
  std::vector<int64_t> dense_blocks;  // with experts: the blocks that keep a dense MLP, ascending

  int64_t kv() const { return kv_heads > 0 ? kv_heads : heads; }
  int64_t mlp() const;
  int64_t expert_mlp() const { return expert_units > 0 ? expert_units : mlp(); }
  // Whether block `block` (0-based) has experts.
  bool IsSparse(int64_t block) const;
  int64_t SparseBlocks() const;
  // Whether `tp` tensor-parallel ranks can split a block: the heads, the key-value heads and
  // the MLP units each divide by tp, and experts only at tp 1 (what the trainer's --tp
  // accepts).
  bool SplitsOver(int tp) const;
  // A dense block's parameters, or a sparse one's (its experts included).
  double BlockParams(bool sparse = false) const;
  // A sparse block's experts' parameters (what expert parallelism divides).
  double ExpertParams() const;
  // Parameters of everything: blocks, embedding and an untied head.
  double Params() const;
  // A block's forward FLOPs per token: a sparse block's router, top_k experts and shared
  // expert (the parameters a token meets), not its other experts.
  double BlockForwardFlops(bool sparse = false) const;
  // Model FLOPs per token of a training step (forward and backward, no recomputation), each
  // block dense or sparse as it is.
  double TrainFlopsPerToken() const;
};

}  // namespace conveyor

#endif  // CONVEYOR_SIM_TRANSFORMER_SPEC_H_
