#include "conveyor/train/hf_export.h"

#include "conveyor/common/error.h"
#include "conveyor/nn/lora.h"
#include "conveyor/train/checkpoint.h"
#include "conveyor/train/llama_architecture.h"
#include "conveyor/train/model_registry.h"

namespace conveyor {

std::vector<std::string> ExportHfCheckpoint(const std::string& checkpoint, const std::string& out,
                                            const HfWriteOptions& options) {
  CheckpointWeights weights(checkpoint);
  const TrainConfig& config = weights.config();
  CONVEYOR_CHECK(IsLanguageModel(config.model.kind))
      << "checkpoint " << checkpoint << " holds a " << ModelKindName(config.model.kind)
      << ", which has no Hugging Face layout: a llama or a gpt (written as a GPT-2) does";
  const std::vector<std::string> state = weights.StateNames();
  CONVEYOR_CHECK(state.empty())
      << "checkpoint " << checkpoint << " holds " << state.front()
      << ": selection biases (--router-bias-rate) choose the experts a token reaches, and no "
         "Hugging Face layout keeps them; the exported model would route otherwise";
  const HfModelConfig folder = ArchitectureOf(config.model.kind).HfConfig(config.model);
  HfWriteOptions with_tokenizer = options;
  // The checkpoint's copy, verified against its manifest (CheckpointConfig).
  if (!config.tokenizer.empty()) {
    with_tokenizer.files[kTokenizerFile] = config.tokenizer;
    // conveyor's prompts and documents begin with the BOS id (PromptTokens); without
    // this file transformers' tokenizer would not add it.
    with_tokenizer.texts["tokenizer_config.json"] =
        "{\n  \"add_bos_token\": true,\n  \"add_eos_token\": false\n}\n";
  }
  // A LoRA checkpoint's adapted projections are written merged: W + (alpha / r) B A.
  const double lora_scale =
      config.model.lora_rank > 0 ? LlamaConfigOf(config.model).lora->scale() : 0;
  return WriteHfCheckpoint(out, folder, with_tokenizer, [&](const std::string& name) {
    const at::Tensor weight = weights.Read(name);
    const bool adapted = lora_scale > 0 && name.size() > 7 &&
                         name.compare(name.size() - 7, 7, ".weight") == 0 &&
                         weights.Holds(LoraAName(name));
    if (!adapted) return weight;
    return MergeLora(weight, weights.Read(LoraAName(name)), weights.Read(LoraBName(name)),
                     lora_scale);
  });
}

}  // namespace conveyor
