// Test support: a tiny Llama, its parameters by name, its logits and random token ids.
#ifndef CONVEYOR_NN_LLAMA_TESTING_H_
#define CONVEYOR_NN_LLAMA_TESTING_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <string>

#include "conveyor/nn/llama.h"

namespace conveyor {

// Vocabulary 48, hidden 32, 4 heads of which 2 key-value, MLP 40, 2 layers, 16 positions,
// rope_theta 500000.
LlamaConfig TinyLlamaConfig();

// Every parameter of `layers`, by name, detached.
std::map<std::string, at::Tensor> ParametersByName(const LayerList& layers);

// The logits (n, T, V) of `layers` (a whole model) for ids (n, T), without gradients; with
// `positions` (n, T) those of packed documents (microbatch.h).
at::Tensor LogitsOf(const LayerList& layers, const at::Tensor& ids,
                    const at::Tensor& positions = {});

// (n, T) token ids below c.vocab, drawn from `seed`.
at::Tensor RandomIds(const LlamaConfig& c, int64_t n, int64_t t, uint64_t seed);

// max |got - want| / max |want|.
double RelativeError(const at::Tensor& got, const at::Tensor& want);

}  // namespace conveyor

#endif  // CONVEYOR_NN_LLAMA_TESTING_H_
