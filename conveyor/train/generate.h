// Text from a trained byte-level GPT, running its stages as a forward-only pipeline.
#ifndef CONVEYOR_TRAIN_GENERATE_H_
#define CONVEYOR_TRAIN_GENERATE_H_

#include <cstdint>
#include <string>

#include "conveyor/train/trainer.h"

namespace conveyor {

// Appends `tokens` bytes to `prompt` (empty: starts from a newline), each from the last
// `context` bytes, sampled at `temperature` (0 = greedy) with randomness drawn from `seed`.
// Collective; every rank returns the same text (the continuation only).
std::string Generate(Trainer& trainer, const std::string& prompt, int tokens, double temperature,
                     uint64_t seed, int context);

}  // namespace conveyor

#endif  // CONVEYOR_TRAIN_GENERATE_H_
