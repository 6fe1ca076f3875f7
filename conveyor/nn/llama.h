// A Llama-family decoder (Touvron et al., 2023) as a list of layers, with Hugging Face's
// parameter names (LlamaForCausalLM), so that its checkpoints map tensor for tensor:
//
//   model.embed_tokens.weight                        (V, C)
//   model.layers.i.input_layernorm.weight            (C)        RMSNorm before attention
//   model.layers.i.self_attn.q_proj.weight           (H d, C)   d = C / H
//   model.layers.i.self_attn.k_proj.weight           (KV d, C)  grouped-query attention
//   model.layers.i.self_attn.v_proj.weight           (KV d, C)
//   model.layers.i.self_attn.o_proj.weight           (C, H d)
//   model.layers.i.post_attention_layernorm.weight   (C)        RMSNorm before the MLP
//   model.layers.i.mlp.gate_proj.weight              (F, C)     SwiGLU (Shazeer, 2020)
//   model.layers.i.mlp.up_proj.weight                (F, C)
//   model.layers.i.mlp.down_proj.weight              (C, F)
//   model.norm.weight                                (C)
//   lm_head.weight                                   (V, C)     absent when tied: the head
//                                                               uses model.embed_tokens.weight
// No biases. Queries and keys are rotated (RoPE, Su et al., 2021) in Hugging Face's
// rotate-half convention: dimension j < d/2 pairs with j + d/2, at angle
// position x rope_theta^(-2j/d). Each group of H / KV query heads shares one key-value head
// (head h uses key-value head h / (H / KV)). Causal attention; targets -1 are not counted.
// A micro-batch with positions (packed documents, microbatch.h) is rotated by them and
// attends within each document only.
//
// Shapes: ids (n, T) -> embedding (n, T, C) -> decoder layers (n, T, C) -> head logits
// (n, T, ceil(V/p)). Every projection goes through Linear, so its weight gradient can be deferred.
//
// Initialisation: every matrix N(0, 0.02) (Hugging Face's initializer_range), norms 1, each
// tensor drawn from its own stream (TensorInitGenerator(seed, name)): any split of the model
// builds the same weights.
//
// Tensor parallelism over p = tp.size ranks (tensor_parallel.h): query heads, key-value
// heads, MLP units and vocabulary rows split; p must divide H, KV and F; a vocabulary V it
// does not divide is padded (tensor_parallel_split.h). The layouts each layer declares
// (parameter_spec.h; d the head size):
//   model.layers.i.self_attn.q_proj.weight          ColumnParallel    (H d, C) -> (H d/p, C)
//   model.layers.i.self_attn.k_proj / v_proj.weight KeyValueParallel  (KV d, C) -> (KV d/p, C),
//                                                   or (d, C) when p > KV (tp.kv_replicas)
//   model.layers.i.self_attn.o_proj.weight          RowParallel       (C, H d) -> (C, H d/p)
//   model.layers.i.mlp.gate_proj / up_proj.weight   ColumnParallel    (F, C) -> (F/p, C)
//   model.layers.i.mlp.down_proj.weight             RowParallel       (C, F) -> (C, F/p)
//   model.embed_tokens.weight, lm_head.weight       VocabParallel     (V, C) -> (ceil(V/p), C)
// and the norms replicated. Activations between layers stay replicated (n, T, C), or under
// sequence parallelism hold the rank's T/p positions.
//
// Context parallelism over N = cp.size ranks (context_parallel.h): each rank runs the model on
// its T/N positions of every sequence (the embedding takes them from the ids, the loss from
// the targets), rotates them by their true positions and attends by ring; the logits are
// (n, T/N, ceil(V/p)). Not with Mixture-of-Experts layers, nor while generating.
#ifndef CONVEYOR_NN_LLAMA_H_
#define CONVEYOR_NN_LLAMA_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "conveyor/nn/layer.h"
#include "conveyor/nn/lora.h"
#include "conveyor/nn/moe_mlp.h"
#include "conveyor/nn/parallel_context.h"

namespace conveyor {

// Which decoder layers are sparse and how their MoE block is laid out.
struct LlamaMoe {
  MoeConfig block;                // block.hidden is the model's hidden
  std::string prefix = "mlp";     // the block's names; "block_sparse_moe" for Mixtral
  int first_dense = 0;            // the first layers stay dense (DeepSeek's first_k_dense_replace)
  int sparse_step = 1;            // layer i sparse when (i + 1) % step == 0 (decoder_sparse_step)
  std::vector<int> dense_layers;  // these stay dense too (Qwen's mlp_only_layers)

  // Whether layer `i` (0-based) is sparse.
  bool IsSparse(int i) const;
};

enum class QkNorm { kNone, kHead, kProjection };

struct LlamaConfig {
  int vocab = 256;         // V
  int hidden = 64;         // C
  int intermediate = 176;  // F: the MLP's units
  int heads = 4;           // H: C must be a multiple
  int kv_heads = 2;        // KV: must divide H
  int layers = 4;          // decoder layers
  int max_seq_len = 128;   // T at most
  double rms_norm_eps = 1e-5;
  double rope_theta = 10000;
  bool tie_embeddings = false;
  bool recompute_attention = false;  // selective recomputation of the attention scores
  // Not drawn: matrices allocated but not drawn (their values undefined), for weights that are
  // read from a checkpoint next, or shapes only; the norms are still 1.
  WeightInit weights = WeightInit::kDrawn;
  // RMSNorm of the queries and keys before the rotation: kHead (Qwen3) normalises each head's,
  // kProjection (OLMoE) the whole projections (the key's over this rank's KV heads: tp 1).
  //   model.layers.i.self_attn.q_norm.weight   (d) kHead, (H d) kProjection, replicated
  //   model.layers.i.self_attn.k_norm.weight   (d) kHead, (KV d) kProjection
  QkNorm qk_norm = QkNorm::kNone;
  // Biases on the query, key and value projections (Qwen2), laid out as their weights:
  //   model.layers.i.self_attn.q_proj.bias (H d), k_proj.bias / v_proj.bias (KV d)
  bool qkv_bias = false;
  // Mixture-of-Experts (Mixtral, Qwen2/3-MoE, OLMoE, DeepSeek-style): the sparse decoder
  // layers' MLP is an MoE block (moe_mlp.h) under PREFIX = model.layers.i.<moe->prefix>.
  std::optional<LlamaMoe> moe;
  // LoRA adapters (lora.h) on the decoder layers' projections lora->targets names, every
  // other weight frozen (requires_grad false). Not with moe.
  //   model.layers.i.self_attn.q_proj.lora_A.weight  (r, C)   lora_B.weight (H d, r), ...
  std::optional<LoraConfig> lora;
  TensorParallel tp;
  ExpertParallel ep;   // the MoE blocks' expert-parallel group (moe_mlp.h)
  ContextParallel cp;  // the sequence's split (context_parallel.h); not with moe
};

// Whether decoder layer i (from 0) of `config` has an MoE block rather than a dense MLP.
bool IsSparseLayer(const LlamaConfig& config, int i);

// Checks the config (UserError naming the bad value), tp included; with lora: its targets
// known, its rank within [1, min(in, out)] of every adapted projection, no moe, and no key or
// value adapter where tp.kv_replicas > 1.
void CheckLlamaConfig(const LlamaConfig& config);

// The model's layers + 2 layers: the embedding (global index 0), the decoder layers, the head
// (final norm and LM head). Only those with a global index in [begin, end) are built (end < 0:
// through the last), each as it is in the whole model; precondition 0 <= begin <= end.
LayerList BuildLlama(const LlamaConfig& config, uint64_t seed, int begin = 0, int end = -1);

// For each of BuildLlama's layers, the name and full (unsharded) shape of its parameters,
// without building anything.
std::vector<ParameterShapes> LlamaLayerShapes(const LlamaConfig& config);

// Every parameter of the model once (a tied embedding is one tensor): what a checkpoint of
// it must hold.
ParameterShapes LlamaParameterShapes(const LlamaConfig& config);

// RMSNorm as Llama computes it: x / sqrt(mean(x^2 over the last dim) + eps), in fp32, back in
// x's dtype, times weight. x (..., C), weight (C).
at::Tensor RmsNorm(const at::Tensor& x, const at::Tensor& weight, double eps);

// x (n, heads, T, d) rotated by its positions first_position .. first_position + T - 1
// (rotate-half, above), or by `positions`: (T) int64, or (n, T), each sample's own (packed
// documents, microbatch.h).
at::Tensor RotaryEmbedding(const at::Tensor& x, double theta, int64_t first_position = 0);
at::Tensor RotaryEmbedding(const at::Tensor& x, double theta, const at::Tensor& positions);

}  // namespace conveyor

#endif  // CONVEYOR_NN_LLAMA_H_
