// A Hugging Face model folder's config.json, read into conveyor's model configuration.
//
// Llama (model_type "llama", LlamaConfig's fields): hidden_size, intermediate_size,
// num_attention_heads, num_key_value_heads (default: num_attention_heads),
// num_hidden_layers, vocab_size, max_position_embeddings, rms_norm_eps, rope_theta (default
// 10000), tie_word_embeddings (default false).
//
// Strict: every other field must be one that changes nothing conveyor computes (token ids,
// dtype, cache and version notes: kIgnoredFields in the .cc) or hold the one value conveyor
// implements (hidden_act "silu", no attention or MLP biases, no rope_scaling, no sliding
// window, no dropout, head_dim = hidden_size / num_attention_heads, pretraining_tp 1). Any
// other field or value throws UserError naming the file, the field and the value: a model
// conveyor would compute differently is never loaded silently.
//
// Thread-safety: pure functions.
#ifndef CONVEYOR_NN_HF_CONFIG_H_
#define CONVEYOR_NN_HF_CONFIG_H_

#include <string>

#include "conveyor/nn/llama.h"

namespace conveyor {

// The Llama that config.json at `path` describes (tp left at its default), checked
// (CheckLlamaConfig). `text` is the file's contents; `path` names it in errors.
LlamaConfig ParseHfLlamaConfig(const std::string& text, const std::string& path);

// ParseHfLlamaConfig of the file at `path`; UserError when it cannot be read.
LlamaConfig ReadHfLlamaConfig(const std::string& path);

// config.json for `config` (tp ignored), as Hugging Face's LlamaForCausalLM writes it:
// every field ParseHfLlamaConfig reads, with hidden_act "silu" and `torch_dtype` ("float32",
// "bfloat16" or "float16"). ParseHfLlamaConfig gives `config` back.
std::string HfLlamaConfigJson(const LlamaConfig& config, const std::string& torch_dtype);

}  // namespace conveyor

#endif  // CONVEYOR_NN_HF_CONFIG_H_
