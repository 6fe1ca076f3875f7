// SplitMix64 (Steele, Lea, Flood 2014): the generator whose state advances by a fixed odd
// "gamma" and whose output is a bijective 64-bit mix of the state. Conveyor uses it to turn
// seeds and counters into well-spread 64-bit values (data sampling, per-layer generators).
//
// Thread-safety: pure functions, safe from any thread.
#ifndef CONVEYOR_COMMON_SPLIT_MIX_H_
#define CONVEYOR_COMMON_SPLIT_MIX_H_

#include <cstdint>

namespace conveyor {

// The state increment of SplitMix64: 2^64 / golden ratio, made odd.
inline constexpr uint64_t kSplitMixGamma = 0x9e3779b97f4a7c15ULL;

// The output mix of SplitMix64 applied to a state z; a bijection on 64-bit values.
uint64_t SplitMixFinalize(uint64_t z);

// The first output of a SplitMix64 generator whose state is x: SplitMixFinalize(x + gamma).
uint64_t SplitMix64(uint64_t x);

}  // namespace conveyor

#endif  // CONVEYOR_COMMON_SPLIT_MIX_H_
