#include "conveyor/train/hf_export.h"

#include "conveyor/common/error.h"
#include "conveyor/train/builtin_tasks.h"
#include "conveyor/train/checkpoint.h"

namespace conveyor {

std::vector<std::string> ExportHfCheckpoint(const std::string& checkpoint, const std::string& out,
                                            const HfWriteOptions& options) {
  CheckpointWeights weights(checkpoint);
  CONVEYOR_CHECK(weights.config().model == ModelKind::kLlama)
      << "checkpoint " << checkpoint << " holds a " << ModelKindName(weights.config().model)
      << ", conveyor's own architecture: only a llama is written in Hugging Face's layout";
  return WriteHfCheckpoint(out, LlamaConfigOf(weights.config()), options,
                           [&](const std::string& name) { return weights.Read(name); });
}

}  // namespace conveyor
