// A Hugging Face model folder's config.json, read into conveyor's model configuration.
//
// GPT-2 (model_type "gpt2", conveyor's GPT: GptConfig): n_embd, n_head, n_layer,
// n_positions, vocab_size, activation_function ("gelu_new" or "gelu_pytorch_tanh": GELU's
// tanh approximation; "gelu": exact), tie_word_embeddings (default true), n_inner (null or
// 4 n_embd), layer_norm_epsilon (1e-5), architectures (GPT2LMHeadModel or GPT2Model).
// Dropout rates are read and not applied: conveyor trains without dropout.
//
// Llama (model_type "llama", LlamaConfig's fields): hidden_size, intermediate_size,
// num_attention_heads, num_key_value_heads (default: num_attention_heads),
// num_hidden_layers, vocab_size, max_position_embeddings, rms_norm_eps, rope_theta (default
// 10000; or, as transformers 5 saves it, rope_parameters {"rope_type": "default",
// "rope_theta": ...}), tie_word_embeddings (default false), architectures (LlamaForCausalLM).
// Qwen2
// (model_type "qwen2", Qwen2ForCausalLM): the Llama's fields and biases on the query, key and
// value projections (qkv_bias, default true); max_window_layers read and not applied;
// layer_types (transformers 5), when present, "full_attention" for every layer.
//
// Mixture-of-Experts Llamas (LlamaConfig::moe, nn/moe_mlp.h), with the Llama's fields
// (rope_theta's default 1e6 for Mixtral):
//   Mixtral (model_type "mixtral", MixtralForCausalLM): num_local_experts,
//     num_experts_per_tok, intermediate_size as each expert's units, every layer sparse,
//     the gates renormalised, names block_sparse_moe.gate / experts.i.w1|w2|w3;
//     router_jitter_noise 0.
//   Qwen2-MoE (model_type "qwen2_moe", Qwen2MoeForCausalLM): as Qwen3-MoE without query and
//     key norms, with Qwen2's projection biases and a shared expert of
//     shared_expert_intermediate_size units scaled by its sigmoid gate (shared_expert,
//     shared_expert_gate).
//   Qwen3-MoE (model_type "qwen3_moe", Qwen3MoeForCausalLM): num_experts (transformers 5:
//     num_local_experts), num_experts_per_tok, moe_intermediate_size, norm_topk_prob (default
//     false), decoder_sparse_step (1), mlp_only_layers ([]; their dense MLP intermediate_size
//     wide), per-head query and key RMSNorm (qk_norm); names mlp.gate / experts.i.gate_proj|...
//   OLMoE (model_type "olmoe", OlmoeForCausalLM): num_experts, num_experts_per_tok,
//     intermediate_size as each expert's units, every layer sparse, norm_topk_prob (default
//     false), RMSNorm of the whole query and key projections (qk_norm kProjection: tp 1);
//     Qwen3-MoE's names; clip_qkv null.
//   router_aux_loss_coef and output_router_logits are training settings: read, not applied
//   (--router-aux-loss-coef chooses the loss).
//
// architectures may be absent; present, it must name only the classes above for the file's
// model_type: a GPT2LMHeadModel that says model_type "llama" is refused, naming both keys.
//
// Strict: every other field must be one that changes nothing conveyor computes (token ids,
// dtype or torch_dtype, cache and version notes: kIgnoredFields in the .cc) or hold the one
// value conveyor implements (hidden_act "silu", no attention or MLP biases, no rope_scaling, no
// sliding window, no dropout, head_dim = hidden_size / num_attention_heads, pretraining_tp 1). Any
// other field or value throws UserError naming the file, the field and the value: a model
// conveyor would compute differently is never loaded silently.
//
// Thread-safety: pure functions.
#ifndef CONVEYOR_NN_HF_CONFIG_H_
#define CONVEYOR_NN_HF_CONFIG_H_

#include <string>

#include "conveyor/nn/gpt.h"
#include "conveyor/nn/llama.h"

namespace conveyor {

// The Llama that config.json at `path` describes (tp left at its default), checked
// (CheckLlamaConfig). `text` is the file's contents; `path` names it in errors.
LlamaConfig ParseHfLlamaConfig(const std::string& text, const std::string& path);

// The GPT-2 that config.json at `path` describes, checked (CheckGptConfig); as above.
GptConfig ParseHfGpt2Config(const std::string& text, const std::string& path);

// A folder's architecture: "llama" (llama set) or "gpt2" (gpt set).
struct HfModelConfig {
  std::string type;
  LlamaConfig llama;
  GptConfig gpt;

  bool gpt2() const { return type == "gpt2"; }
  // The positions the model has: a Llama's max_position_embeddings, a GPT-2's n_positions.
  int positions() const { return gpt2() ? gpt.max_seq_len : llama.max_seq_len; }
  bool tie_embeddings() const { return gpt2() ? gpt.tie_embeddings : llama.tie_embeddings; }
};

// The config.json at `path`, of either architecture (by its model_type); UserError when it
// cannot be read, names another model_type, or is refused as above.
HfModelConfig ReadHfModelConfig(const std::string& path);

// config.json for `config`, as HfLlamaConfigJson or HfGpt2ConfigJson writes it.
std::string HfModelConfigJson(const HfModelConfig& config, const std::string& torch_dtype);

// config.json for a GPT (tp ignored) as Hugging Face's GPT2LMHeadModel writes it; dropout
// rates 0. ParseHfGpt2Config gives `config` back.
std::string HfGpt2ConfigJson(const GptConfig& config, const std::string& torch_dtype);

// The model_type a Llama of `config` is saved as: "llama", "qwen2" (projection biases), or
// "mixtral" / "qwen2_moe" / "qwen3_moe" / "olmoe" for an MoE one of their layout. UserError
// naming what no Hugging Face layout conveyor writes holds (sigmoid scores, a capacity, first
// dense layers; a shared expert or projection biases but not both with a gate; a dense Llama
// with query and key norms; a Mixtral's must be every layer sparse, renormalised, qk_norm
// off).
std::string HfLlamaModelType(const LlamaConfig& config);

// config.json for `config` (tp ignored), as Hugging Face's LlamaForCausalLM (Qwen2For..,
// MixtralFor.., Qwen2MoeFor.., Qwen3MoeFor.., OlmoeFor..) writes it:
// every field ParseHfLlamaConfig reads, with hidden_act "silu" and `torch_dtype` ("float32",
// "bfloat16" or "float16"). ParseHfLlamaConfig gives `config` back.
std::string HfLlamaConfigJson(const LlamaConfig& config, const std::string& torch_dtype);

}  // namespace conveyor

#endif  // CONVEYOR_NN_HF_CONFIG_H_
