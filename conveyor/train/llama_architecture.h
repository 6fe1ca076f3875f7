// The Llama architecture (nn/llama.h), drawn from the seed or read from a Hugging Face folder.
// Fields: layers, hidden, heads, kv_heads (0: heads), intermediate (0: GatedMlpUnits(hidden),
// sim/transformer_spec.h: the width the planner prices), seq_len, rope_theta, rms_norm_eps,
// tie_embeddings, vocab (0: the byte tokenizer's 256); qk_norm ("head": Qwen3's, "projection":
// OLMoE's) and qkv_bias (Qwen2's); Mixture-of-Experts with experts > 0 (top_k, expert_units
// (0: intermediate), the shared expert, the router's scoring, gates and balancing, the
// capacity, which layers are sparse: nn/moe_mlp.h).
#ifndef CONVEYOR_TRAIN_LLAMA_ARCHITECTURE_H_
#define CONVEYOR_TRAIN_LLAMA_ARCHITECTURE_H_

#include "conveyor/nn/llama.h"
#include "conveyor/train/model_architecture.h"

namespace conveyor {

class LlamaArchitecture final : public ModelArchitecture {
 public:
  bool language_model() const override { return true; }
  TransformerSpec Sizes(const ModelSpec& spec) const override;
  // The key-value heads divide heads, and tp divides them or they divide tp; tp divides the
  // MLP units; the head size is even (rotary embeddings rotate pairs).
  void Check(const ModelSpec& spec, int tp) const override;
  int ContextLimit(const ModelSpec& spec) const override;
  void ReadHfConfig(const HfModelConfig& folder, const std::string& path,
                    ModelSpec& spec) const override;
  HfModelConfig HfConfig(const ModelSpec& spec) const override;
  void RecordFields(const ModelSpec& spec, nlohmann::json& model) const override;
  void ReadFields(const nlohmann::json& model, ModelSpec& spec) const override;
  std::shared_ptr<const ModelTask> MakeModel(const ModelSpec& spec, bool recompute_attention,
                                             uint64_t seed) const override;
};

// The Llama `spec` describes: its vocabulary, key-value heads and MLP units resolved
// (Sizes), max_seq_len = seq_len. Checked (CheckLlamaConfig).
LlamaConfig LlamaConfigOf(const ModelSpec& spec, bool recompute_attention = false);

}  // namespace conveyor

#endif  // CONVEYOR_TRAIN_LLAMA_ARCHITECTURE_H_
