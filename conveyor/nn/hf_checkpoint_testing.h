// Test support: Hugging Face Llama folders written from conveyor's own weights.
#ifndef CONVEYOR_NN_HF_CHECKPOINT_TESTING_H_
#define CONVEYOR_NN_HF_CHECKPOINT_TESTING_H_

#include <ATen/core/Tensor.h>

#include <map>
#include <string>

#include "conveyor/nn/llama.h"

namespace conveyor {

// Writes into the existing folder `dir` a config.json describing `config` (Hugging Face's
// LlamaConfig fields) and `weights` (by Hugging Face name) stored as `dtype`: one
// model.safetensors, or with `shards` two files (layer 1's tensors in the second) and
// model.safetensors.index.json.
void WriteHfLlamaFolder(const std::string& dir, const LlamaConfig& config,
                        const std::map<std::string, at::Tensor>& weights, at::ScalarType dtype,
                        bool shards);

// The parameters of BuildLlama(config, seed), by name, detached.
std::map<std::string, at::Tensor> LlamaWeights(const LlamaConfig& config, uint64_t seed);

}  // namespace conveyor

#endif  // CONVEYOR_NN_HF_CHECKPOINT_TESTING_H_
