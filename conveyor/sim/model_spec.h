// The specification of the model a run trains: its architecture (ModelKind) and the fields
// that size it, with their defaults and allowed ranges. One field list for every
// architecture: flags and TOML keys set any field before the kind is known, and each
// architecture reads the fields that apply to it (train/model_architecture.h), which also
// derives its sizes (key-value heads, MLP units, vocabulary: a TransformerSpec).
//
// Pure; a plain value.
#ifndef CONVEYOR_SIM_MODEL_SPEC_H_
#define CONVEYOR_SIM_MODEL_SPEC_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace conveyor {

// The architecture: a byte-level GPT (or a GPT-2), a Llama, or a classifier of fortune
// categories.
enum class ModelKind : uint8_t { kGpt, kClassifier, kLlama };

// `text` ("gpt", "classifier", "llama") as a ModelKind. Throws UserError naming `name` (the flag,
// or the file and key), the text and the allowed values.
ModelKind ParseModelKind(std::string_view text, std::string_view name);
// The spelling ParseModelKind reads: "gpt" / "classifier" / "llama".
std::string_view ModelKindName(ModelKind kind);
// Whether `text` is a kind's spelling.
bool IsModelKindName(std::string_view text);

struct ModelSpec {
  ModelKind kind = ModelKind::kGpt;
  int layers = 4;
  int hidden = 64;
  int heads = 4;
  int seq_len = 64;             // tokens per sample
  bool tie_embeddings = false;  // gpt, llama: input embedding and LM head share weights
  int classes = 4;              // classifier: the largest fortune categories
  int kv_heads = 0;             // llama: key-value heads (0 = heads: no grouping)
  int intermediate = 0;         // llama: the MLP's units (0 = GatedMlpUnits(hidden))
  double rope_theta = 10000;    // llama: the rotary embeddings' base
  double rms_norm_eps = 1e-5;   // llama
  int vocab = 0;                // gpt, llama: 0 = the byte tokenizer's 256 ids
  int positions = 0;       // gpt: rows of the position table (0 = seq_len); GPT-2's n_positions
  bool gelu_tanh = false;  // gpt: GPT-2's gelu_new, GELU's tanh approximation
  // llama: Mixture-of-Experts MLPs (nn/moe_mlp.h); experts 0: every MLP dense.
  int experts = 0;                    // E experts a sparse layer
  int top_k = 2;                      // k of them a token
  int expert_units = 0;               // each expert's SwiGLU units (0 = the MLP's, intermediate)
  int shared_expert_units = 0;        // a shared expert's units (0 = none)
  bool shared_expert_gate = false;    // the shared expert scaled by a sigmoid gate (Qwen2-MoE)
  bool router_sigmoid = false;        // sigmoid scores (DeepSeek-V3) instead of a softmax
  bool router_plain_gates = false;    // the k gates not renormalised (norm_topk_prob false)
  double router_aux_loss_coef = 0;    // the Switch load-balancing loss's coefficient
  double router_z_loss_coef = 0;      // the router z-loss's
  double router_bias_rate = 0;        // auxiliary-loss-free balancing's bias step (0: off)
  double capacity_factor = 0;         // 0: dropless; else each expert's capacity factor
  bool drop_by_position = false;      // over capacity, drop the last copies, not the least likely
  int moe_first_dense = 0;            // the first layers stay dense (first_k_dense_replace)
  int moe_sparse_step = 1;            // layer i sparse when (i + 1) % step == 0
  std::vector<int> moe_dense_layers;  // these stay dense too (Qwen's mlp_only_layers)
  bool moe_mixtral_names = false;     // Mixtral's tensor names (block_sparse_moe, w1/w2/w3)
  // llama: RMSNorm of queries and keys: "" none, "head" each head's (Qwen3), "projection" the
  // whole projections' (OLMoE).
  std::string qk_norm;
  bool qkv_bias = false;  // llama: biases on the query, key and value projections (Qwen2)
  // llama: LoRA adapters (nn/lora.h) of this rank on the projections lora_targets names
  // (comma-separated; "" = the attention's four), scaled by lora_alpha / lora_rank (alpha 0:
  // the rank, a scale of 1); the base weights frozen. Rank 0: no adapters, every weight trained.
  int lora_rank = 0;
  double lora_alpha = 0;
  std::string lora_targets;
  // A Hugging Face folder (--model DIR): its config.json sets the architecture's fields, its
  // weights are the initial ones. Empty: weights drawn from the seed.
  std::string model_dir;

  bool operator==(const ModelSpec&) const = default;
};

// Calls visit(key, field, lo, hi) for every integer field of `spec` (a ModelSpec, const or
// not): its setting's key (TOML; the flag is "--" + key with '-' for '_'), the field and its
// allowed range [lo, hi]. The one table of the model's integer ranges.
template <typename Spec, typename Visit>
void ForEachModelInteger(Spec& spec, Visit&& visit) {
  visit("layers", spec.layers, 1, 4096);
  visit("hidden", spec.hidden, 1, 65536);
  visit("heads", spec.heads, 1, 4096);
  visit("seq_len", spec.seq_len, 2, 65536);
  visit("classes", spec.classes, 2, 4096);
  visit("kv_heads", spec.kv_heads, 0, 4096);
  visit("intermediate", spec.intermediate, 0, 1 << 20);
  visit("experts", spec.experts, 0, 4096);
  visit("top_k", spec.top_k, 1, 4096);
  visit("expert_units", spec.expert_units, 0, 1 << 20);
  visit("shared_expert_units", spec.shared_expert_units, 0, 1 << 20);
  visit("moe_first_dense", spec.moe_first_dense, 0, 4096);
  visit("moe_sparse_step", spec.moe_sparse_step, 1, 4096);
  visit("lora_rank", spec.lora_rank, 0, 65536);
}

// The same for the real fields; lo = nullopt means (0, hi]: zero itself is refused
// (CheckInRange's optional form, common/range_check.h).
template <typename Spec, typename Visit>
void ForEachModelReal(Spec& spec, Visit&& visit) {
  visit("rope_theta", spec.rope_theta, std::optional<double>(), 1e12);
  visit("router_aux_loss_coef", spec.router_aux_loss_coef, std::optional<double>(0.0), 1e3);
  visit("router_z_loss_coef", spec.router_z_loss_coef, std::optional<double>(0.0), 1e3);
  visit("router_bias_rate", spec.router_bias_rate, std::optional<double>(0.0), 1.0);
  visit("capacity_factor", spec.capacity_factor, std::optional<double>(0.0), 1e3);
  visit("lora_alpha", spec.lora_alpha, std::optional<double>(0.0), 1e6);
}

// Sets the integer field with key `key` to `value` after checking it against its range; the
// message calls it `name` (a flag, or a file and its key). UserError when out of range.
// Precondition: `key` is one of ForEachModelInteger's.
void SetModelInteger(ModelSpec& spec, std::string_view key, int64_t value, std::string_view name);
// The same for the real fields (NaN and infinities refused too).
void SetModelReal(ModelSpec& spec, std::string_view key, double value, std::string_view name);

}  // namespace conveyor

#endif  // CONVEYOR_SIM_MODEL_SPEC_H_
