// Text from a trained byte-level GPT, its stages run as a forward-only pipeline.
#ifndef CONVEYOR_TRAIN_GENERATE_H_
#define CONVEYOR_TRAIN_GENERATE_H_

#include <cstdint>
#include <string>

#include "conveyor/train/forward_pipeline.h"

namespace conveyor {

// The sampling temperature of `generate` and of train's closing sample unless told otherwise.
inline constexpr double kDefaultTemperature = 0.8;

// Appends `tokens` bytes to `prompt` (empty: starts from a newline), each the next token
// after the last `context` bytes: the last position's logits sampled at `temperature` (0 =
// greedy) with a generator drawn from (seed + k, window length) for the k-th byte. Every
// byte is a run of `forward` with one micro-batch per pipeline direction (the second
// direction's a copy, its result unused), so `forward` builds its program once for all of
// them. On a mesh the ranks of data-parallel replica 0 compute the text (all of them: TP
// layers are collective) and broadcast it over the world; the other replicas only receive
// it. UserError unless tokens >= 0 and context >= 1. Collective over the model's world;
// every rank returns the same text (the continuation only).
std::string Generate(ForwardPipeline& forward, const std::string& prompt, int tokens,
                     double temperature, uint64_t seed, int context);

}  // namespace conveyor

#endif  // CONVEYOR_TRAIN_GENERATE_H_
