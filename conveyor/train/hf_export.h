// A Llama checkpoint of conveyor's own (any mesh, any partition: its tensors are saved whole,
// by global name) written as a Hugging Face model folder (`conveyor export`): Hugging Face's
// tensor names are conveyor's, so the weights map one to one; config.json describes the
// checkpoint's model, its max_position_embeddings being the sequence length it trained at.
// Reads and converts one tensor at a time, holding one output file's tensors at most.
#ifndef CONVEYOR_TRAIN_HF_EXPORT_H_
#define CONVEYOR_TRAIN_HF_EXPORT_H_

#include <string>
#include <vector>

#include "conveyor/nn/hf_checkpoint.h"

namespace conveyor {

// Writes the weights of the checkpoint at `checkpoint` (a step folder, or a folder holding
// `latest`) into the new folder `out` (WriteHfCheckpoint: stored as options.dtype, in files
// of at most options.shard_bytes). Returns the weight files written. UserError for a
// checkpoint of a model Hugging Face has no layout for here (gpt, classifier), for one that
// fails verification (naming the file and tensor), or an `out` that is not new or empty.
std::vector<std::string> ExportHfCheckpoint(const std::string& checkpoint, const std::string& out,
                                            const HfWriteOptions& options);

}  // namespace conveyor

#endif  // CONVEYOR_TRAIN_HF_EXPORT_H_
