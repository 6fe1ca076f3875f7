#include "conveyor/train/lora_export.h"

#include <ATen/ATen.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "conveyor/common/atomic_file.h"
#include "conveyor/common/error.h"
#include "conveyor/formats/safetensors.h"
#include "conveyor/nn/llama.h"
#include "conveyor/train/checkpoint.h"
#include "conveyor/train/llama_architecture.h"

namespace conveyor {
namespace fs = std::filesystem;

int ExportLoraAdapter(const std::string& checkpoint, const std::string& out, at::ScalarType dtype) {
  CheckpointWeights weights(checkpoint);
  const ModelSpec& spec = weights.config().model;
  CONVEYOR_CHECK(spec.kind == ModelKind::kLlama && spec.lora_rank > 0)
      << "checkpoint " << checkpoint << " holds no LoRA adapters (a run with --lora-rank saves "
      << "them): export it without --lora";
  CONVEYOR_CHECK(dtype == at::kFloat || dtype == at::kBFloat16 || dtype == at::kHalf)
      << "adapters are stored as fp32, bf16 or fp16, not " << dtype;
  fs::path target = fs::path(out).lexically_normal();
  if (target.filename().empty()) target = target.parent_path();  // "out/"
  CONVEYOR_CHECK(!target.empty() &&
                 (!fs::exists(target) || (fs::is_directory(target) && fs::is_empty(target))))
      << out << " exists and is not an empty folder: nothing is written over it";
  const LlamaConfig llama = LlamaConfigOf(spec);
  const LoraConfig& lora = *llama.lora;
  std::map<std::string, at::Tensor> tensors;
  int adapted = 0;
  for (const auto& [name, shape] : LlamaParameterShapes(llama)) {
    if (!IsLoraParameter(name)) continue;
    tensors["base_model.model." + name] = weights.Read(name).to(dtype).contiguous();
    ++adapted;
  }
  fs::create_directories(target);
  SaveSafetensors((target / "adapter_model.safetensors").string(), tensors, {{"format", "pt"}});
  const nlohmann::json config = {{"peft_type", "LORA"},
                                 {"task_type", "CAUSAL_LM"},
                                 {"r", lora.rank},
                                 {"lora_alpha", lora.alpha},
                                 {"target_modules", lora.targets},
                                 {"lora_dropout", 0.0},
                                 {"bias", "none"},
                                 {"fan_in_fan_out", false},
                                 {"use_rslora", false},
                                 {"inference_mode", true},
                                 {"base_model_name_or_path", weights.lora_base()}};
  WriteFileAtomically((target / "adapter_config.json").string(), config.dump(2) + "\n");
  return adapted / 2;
}

}  // namespace conveyor
