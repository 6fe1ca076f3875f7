// A GPT-style decoder as a list of layers: token + position embedding, pre-norm blocks
// (causal self-attention with a padding mask, MLP, residuals), final norm and LM head with
// a summed cross-entropy loss. Every linear map defers its weight gradient (Linear).
//
// Shapes: ids (n, T) -> embedding (n, T, C) -> blocks (n, T, C) -> head logits (n, T, V).
// Targets (n, T), -1 where not counted (padding).
//
// Tensor parallelism (config.tp, tensor_parallel.h) over p ranks: every rank builds the full
// initial weights (the same draws as the unsharded model) and keeps its shard, each layer
// declaring its parameters' layouts (parameter_spec.h):
//   blocks.i.attn.qkv.weight / .bias   FusedColumnParallel(3)  (3C, C) -> (3C/p, C)
//   blocks.i.attn.proj.weight          RowParallel             (C, C) -> (C, C/p)
//   blocks.i.mlp.fc.weight / .bias     ColumnParallel          (4C, C) -> (4C/p, C)
//   blocks.i.mlp.proj.weight           RowParallel             (C, 4C) -> (C, 4C/p)
//   embed.wte, head.lm.weight          VocabParallel           (V, C) -> (ceil(V/p), C)
// and the rest replicated (norms, position embeddings, the row-parallel linears' biases). Tied
// embeddings: the head holds embed.wte under its name, the same row shard. Activations between
// layers stay replicated (n, T, C), or under sequence parallelism are this rank's positions
// (n, T/p, C), whose replicated parameters' gradients are then summed over the TP ranks
// (ReplicatedSpec). The head's output is this rank's logits (n, T, ceil(V/p)), padded columns
// included, never gathered; LossSum turns them into the full loss, the same on every rank.
// Forward and backward are then collectives over config.tp.group.
#ifndef CONVEYOR_NN_GPT_H_
#define CONVEYOR_NN_GPT_H_

#include <cstdint>

#include "conveyor/nn/layer.h"
#include "conveyor/nn/tensor_parallel.h"

namespace conveyor {

struct GptConfig {
  int vocab = 256;        // byte-level
  int hidden = 64;        // C
  int heads = 4;          // C must be a multiple
  int layers = 4;         // transformer blocks
  int max_seq_len = 128;  // T at most
  bool tie_embeddings = false;
  bool recompute_attention = false;  // selective recomputation of the attention scores
  TensorParallel tp;                 // p = tp.size must divide heads (vocab padded)
  // GPT-2's "gelu_new": the MLP's GELU in its tanh approximation; false: exact (erf).
  bool gelu_tanh = false;
  // Not drawn: the normal-drawn weights are allocated undrawn (their values are read
  // afterwards, from a Hugging Face folder) or as shapes only; norms and biases keep their
  // initial values.
  WeightInit weights = WeightInit::kDrawn;
};

// Checks the config (UserError naming the bad value), tp included (CheckTensorParallel).
void CheckGptConfig(const GptConfig& config);

// The model's layers + 2 layers: the embedding (global index 0), the blocks, the head. Only
// those with a global index in [begin, end) are built (end < 0: through the last), each as it
// is in the whole model; precondition 0 <= begin <= end.
LayerList BuildGpt(const GptConfig& config, uint64_t seed, int begin = 0, int end = -1);

// For each of BuildGpt's layers, the name and full (unsharded) shape of its parameters,
// without building them (a tied head lists the embedding's name again).
std::vector<ParameterShapes> GptLayerShapes(const GptConfig& config);

}  // namespace conveyor

#endif  // CONVEYOR_NN_GPT_H_
