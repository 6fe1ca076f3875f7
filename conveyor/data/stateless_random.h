// Counter-based randomness: every value is a pure function of its inputs, with no hidden
// generator state. A batch drawn from (seed, step, sample) is therefore the same on every
// rank, for every pipeline configuration, and after a resume that knows only the step.
//
// Thread-safety: pure functions, safe from any thread.
#ifndef CONVEYOR_DATA_STATELESS_RANDOM_H_
#define CONVEYOR_DATA_STATELESS_RANDOM_H_

#include <cstdint>
#include <initializer_list>

namespace conveyor {

// A hash of the ordered values, built from SplitMix64 (order matters: {1, 2} and {2, 1}
// differ).
uint64_t HashOf(std::initializer_list<uint64_t> values);

// An integer in [0, n) from a hash (multiply-shift; bias at most n / 2^64). Precondition:
// n >= 1.
uint64_t UniformIndex(uint64_t hash, uint64_t n);

// A double in [0, 1) from the top 53 bits of a hash.
double UniformUnit(uint64_t hash);

// Position `index` of a random permutation of [0, n) chosen by `key`: for a fixed (n, key),
// a bijection of [0, n), computed for one index at a time without any table (a balanced
// Feistel network over the smallest even power of two >= n, walking the cycle back into
// [0, n)). Preconditions: n >= 1, index < n.
uint64_t PermutedIndex(uint64_t index, uint64_t n, uint64_t key);

}  // namespace conveyor

#endif  // CONVEYOR_DATA_STATELESS_RANDOM_H_
