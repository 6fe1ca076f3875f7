// A transformer's sizes as the planner prices it (layers, hidden, heads, key-value heads, MLP
// units, vocabulary, sequence length, gated or not), and what follows from them: parameter
// counts and FLOPs per token.
//
// Pure; a plain value.
#ifndef CONVEYOR_SIM_TRANSFORMER_SPEC_H_
#define CONVEYOR_SIM_TRANSFORMER_SPEC_H_

#include <cstdint>

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

  int64_t kv() const { return kv_heads > 0 ? kv_heads : heads; }
  int64_t mlp() const;
  // Whether `tp` tensor-parallel ranks can split a block: the heads, the key-value heads and
  // the MLP units each divide by tp (what the trainer's --tp accepts).
  bool SplitsOver(int tp) const;
  double BlockParams() const;
  // Parameters of everything: blocks, embedding and an untied head.
  double Params() const;
  // A block's forward FLOPs per token.
  double BlockForwardFlops() const;
  // Model FLOPs per token of a training step (forward and backward, no recomputation).
  double TrainFlopsPerToken() const;
};

}  // namespace conveyor

#endif  // CONVEYOR_SIM_TRANSFORMER_SPEC_H_
