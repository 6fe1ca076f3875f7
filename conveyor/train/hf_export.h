// A language-model checkpoint of conveyor's own (any mesh, any partition: its tensors are
// saved whole, by global name) written as a Hugging Face model folder (`conveyor export`): a
// Llama's tensor names are Hugging Face's; a GPT is written as a GPT-2 (HfTensors: its names,
// Conv1D weights transposed; activation_function "gelu_new" when it computes GPT-2's GELU,
// "gelu" otherwise). config.json describes the checkpoint's model, a Llama's
// max_position_embeddings being the sequence length it trained at, a GPT's n_positions its
// position table's rows. The checkpoint's tokenizer.model, when it has one, verified against
// its manifest, is written with them, and a tokenizer_config.json that has transformers'
// tokenizer add the BOS id as conveyor does. A LoRA checkpoint (nn/lora.h) is written merged:
// each adapted weight as W + (alpha / r) B A, a plain Llama folder (its adapters alone in
// PEFT's layout: lora_export.h).
// Reads and converts one tensor at a time, holding one output file's tensors at most.
#ifndef CONVEYOR_TRAIN_HF_EXPORT_H_
#define CONVEYOR_TRAIN_HF_EXPORT_H_

#include <string>
#include <vector>

#include "conveyor/formats/hf_checkpoint.h"

namespace conveyor {

// Writes the weights of the checkpoint at `checkpoint` (a step folder, or a folder holding
// `latest`) into the new folder `out` (WriteHfCheckpoint: stored as options.dtype, in files
// of at most options.shard_bytes). Returns the weight files written. UserError for a
// checkpoint of a model Hugging Face has no layout for here (the classifier), for one that
// fails verification (naming the file and tensor), or an `out` that is not new or empty.
std::vector<std::string> ExportHfCheckpoint(const std::string& checkpoint, const std::string& out,
                                            const HfWriteOptions& options);

}  // namespace conveyor

#endif  // CONVEYOR_TRAIN_HF_EXPORT_H_
