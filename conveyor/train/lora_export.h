// A LoRA checkpoint's adapters (nn/lora.h) written in PEFT's layout (`conveyor export
// --lora DIR`), for loading onto the base model with peft's PeftModel.from_pretrained:
//
//   DIR/adapter_config.json        {"peft_type": "LORA", "task_type": "CAUSAL_LM", "r",
//                                   "lora_alpha", "target_modules", "lora_dropout": 0,
//                                   "bias": "none", "base_model_name_or_path": the base
//                                   folder the run trained on ("" when drawn), ...}
//   DIR/adapter_model.safetensors  base_model.model.<A's name> (r, in) and
//                                  base_model.model.<B's name> (out, r) for every adapted
//                                  projection: base_model.model.model.layers.0.self_attn.
//                                  q_proj.lora_A.weight, ...
// The tensors whole (any mesh), stored as `dtype` (fp32, bf16 or fp16).
#ifndef CONVEYOR_TRAIN_LORA_EXPORT_H_
#define CONVEYOR_TRAIN_LORA_EXPORT_H_

#include <ATen/core/ScalarType.h>

#include <string>

namespace conveyor {

// Writes the adapters of the checkpoint at `checkpoint` (a step folder or a folder holding
// `latest`) into the new folder `out`, verified as the checkpoint's weights are read. Returns
// the number of adapted projections. UserError for a checkpoint without adapters, one that
// fails verification, or an `out` that exists and is not an empty folder.
int ExportLoraAdapter(const std::string& checkpoint, const std::string& out, at::ScalarType dtype);

}  // namespace conveyor

#endif  // CONVEYOR_TRAIN_LORA_EXPORT_H_
