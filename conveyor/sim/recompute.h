// Activation recomputation, as the trainer runs it and the auto-planner prices it: none;
// full (each stage keeps only its input and runs its forward again before the backward);
// selective (only the attention scores are recomputed).
//
// Thread-safety: pure functions over constant tables.
#ifndef CONVEYOR_SIM_RECOMPUTE_H_
#define CONVEYOR_SIM_RECOMPUTE_H_

#include <cstdint>
#include <string_view>

namespace conveyor {

enum class Recompute : uint8_t { kNone, kFull, kSelective };

// `text` ("none", "full", "selective") as a Recompute. Throws UserError naming `name` (the
// flag, or the file and key), the text and the allowed values.
Recompute ParseRecompute(std::string_view text, std::string_view name);
// The spelling ParseRecompute reads.
std::string_view RecomputeName(Recompute recompute);

}  // namespace conveyor

#endif  // CONVEYOR_SIM_RECOMPUTE_H_
