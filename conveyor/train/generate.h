// Text (or token ids) from a trained language model, its stages run as a forward-only
// pipeline.
#ifndef CONVEYOR_TRAIN_GENERATE_H_
#define CONVEYOR_TRAIN_GENERATE_H_

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "conveyor/data/tokenizer.h"
#include "conveyor/train/forward_pipeline.h"

namespace conveyor {

// The sampling temperature of `generate` and of train's closing sample unless told otherwise.
inline constexpr double kDefaultTemperature = 0.8;

// How the next token is drawn from the last position's logits: temperature 0 takes the
// largest (greedy); otherwise the logits are divided by the temperature, only the top_k
// largest kept (0: all), then only the most probable tokens whose probabilities first reach
// top_p in total (1: all; the most probable is always kept), and one is drawn from the rest
// renormalised.
struct Sampling {
  double temperature = kDefaultTemperature;
  int64_t top_k = 0;
  double top_p = 1;
};

// Checks `sampling` (UserError naming the flag and the value): temperature 0 or within [0.001, 100]
// (below that the scaled logits overflow a float), top_k >= 0, top_p in (0, 1].
void CheckSampling(const Sampling& sampling);

// One token per row of `logits` (n, V), drawn as `sampling` says with `gen` (CPU), (n) int64
// on logits' device.
at::Tensor SampleTokens(const at::Tensor& logits, const Sampling& sampling, at::Generator gen);

// GenerateTokens over token ids: appends `tokens` ids to `prompt` (non-empty, each within the
// model's vocabulary), the k-th drawn with a generator from (seed + k, window length);
// returns the continuation alone, the same on every rank. As Generate below otherwise.
// With `kv_cache`, while the sequence fits `context` each stage's attention layers keep
// their keys and values (conveyor/nn/kv_cache.h): the prompt is run once, then one token
// per step; past the context every step computes the window whole, as without it. The
// tokens are those of recomputation (up to floating-point rounding).
std::vector<int64_t> GenerateTokens(ForwardPipeline& forward, std::vector<int64_t> prompt,
                                    int tokens, const Sampling& sampling, uint64_t seed,
                                    int context, bool kv_cache = true);

// Appends `tokens` tokens to `prompt`, encoded by `tokenizer` as PromptTokens does (for the
// byte tokenizer, an empty prompt is a newline), each the next token after the last
// `context` ones: the last position's logits sampled at `temperature` (0 = greedy) with a
// generator drawn from (seed + k, window length) for the k-th token; returns their text.
// Every token is a run of `forward` with one micro-batch per pipeline direction (the second
// direction's a copy, its result unused), so `forward` builds its program once for all of
// them; through the key-value cache as GenerateTokens says. On a mesh the ranks of data-parallel
// replica 0 compute the text (all of them: TP layers are collective) and broadcast it over the
// world; the other replicas only receive it. UserError unless tokens >= 0 and context >= 1.
// Collective over the model's world; every rank returns the same text (the continuation only).
std::string Generate(ForwardPipeline& forward, const Tokenizer& tokenizer,
                     const std::string& prompt, int tokens, double temperature, uint64_t seed,
                     int context);

}  // namespace conveyor

#endif  // CONVEYOR_TRAIN_GENERATE_H_
