// The GPT architecture (nn/gpt.h): conveyor's byte-level GPT, or a GPT-2 read from a Hugging
// Face folder. Fields: layers, hidden, heads, seq_len, tie_embeddings, vocab (0: the byte
// tokenizer's 256), positions (0: seq_len), gelu_tanh. MLP units 4 x hidden.
#ifndef CONVEYOR_TRAIN_GPT_ARCHITECTURE_H_
#define CONVEYOR_TRAIN_GPT_ARCHITECTURE_H_

#include "conveyor/nn/gpt.h"
#include "conveyor/train/model_architecture.h"

namespace conveyor {

class GptArchitecture final : public ModelArchitecture {
 public:
  bool language_model() const override { return true; }
  TransformerSpec Sizes(const ModelSpec& spec) const override;
  void ReadHfConfig(const HfModelConfig& folder, const std::string& path,
                    ModelSpec& spec) const override;
  HfModelConfig HfConfig(const ModelSpec& spec) const override;
  void RecordFields(const ModelSpec& spec, nlohmann::json& model) const override;
  void ReadFields(const nlohmann::json& model, ModelSpec& spec) const override;
  std::shared_ptr<const ModelTask> MakeModel(const ModelSpec& spec, bool recompute_attention,
                                             uint64_t seed) const override;
};

// The GPT `spec` describes: its vocabulary resolved, max_seq_len = max(seq_len, positions),
// GPT-2's GELU when gelu_tanh. Checked (CheckGptConfig).
GptConfig GptConfigOf(const ModelSpec& spec, bool recompute_attention = false);

}  // namespace conveyor

#endif  // CONVEYOR_TRAIN_GPT_ARCHITECTURE_H_
