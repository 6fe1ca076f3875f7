#include "conveyor/train/hf_export.h"

#include "conveyor/common/error.h"
#include "conveyor/train/builtin_tasks.h"
#include "conveyor/train/checkpoint.h"

namespace conveyor {

std::vector<std::string> ExportHfCheckpoint(const std::string& checkpoint, const std::string& out,
                                            const HfWriteOptions& options) {
  CheckpointWeights weights(checkpoint);
  const TrainConfig& config = weights.config();
  CONVEYOR_CHECK(IsLanguageModel(config.model))
      << "checkpoint " << checkpoint << " holds a " << ModelKindName(config.model)
      << ", which has no Hugging Face layout: a llama or a gpt (written as a GPT-2) does";
  HfModelConfig folder;
  if (config.model == ModelKind::kGpt) {
    folder.type = "gpt2";
    folder.gpt = GptConfigOf(config);
  } else {
    folder.type = "llama";
    folder.llama = LlamaConfigOf(config);
  }
  HfWriteOptions with_tokenizer = options;
  // The checkpoint's copy, verified against its manifest (CheckpointConfig).
  if (!config.tokenizer.empty()) with_tokenizer.files[kTokenizerFile] = config.tokenizer;
  return WriteHfCheckpoint(out, folder, with_tokenizer,
                           [&](const std::string& name) { return weights.Read(name); });
}

}  // namespace conveyor
