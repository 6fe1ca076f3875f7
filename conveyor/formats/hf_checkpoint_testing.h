// Test support: Hugging Face Llama folders written from conveyor's own weights.
#ifndef CONVEYOR_FORMATS_HF_CHECKPOINT_TESTING_H_
#define CONVEYOR_FORMATS_HF_CHECKPOINT_TESTING_H_

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

// Whether Debian's interpreter (/usr/bin/python3, the one python3-torch installs for; not
// whichever python3 comes first on PATH) can import torch: the reference tests skip without.
bool PythonHasTorch();

// Runs the plain-PyTorch model of the folder `dir`'s architecture (testdata/reference/
// llama.py or gpt2.py) on ids (n, T) int64 (written to dir/ids.safetensors) and returns its
// logits, (n, T, V) fp32. Fails the test (and returns an undefined tensor) when the script
// fails.
at::Tensor ReferenceLogits(const std::string& dir, const at::Tensor& ids);

// The parameters of BuildLlama(config, seed), by name, detached.
std::map<std::string, at::Tensor> LlamaWeights(const LlamaConfig& config, uint64_t seed);

}  // namespace conveyor

#endif  // CONVEYOR_FORMATS_HF_CHECKPOINT_TESTING_H_
