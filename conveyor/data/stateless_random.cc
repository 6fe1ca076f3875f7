#include "conveyor/data/stateless_random.h"

#include "conveyor/common/error.h"
#include "conveyor/common/split_mix.h"

namespace conveyor {

uint64_t HashOf(std::initializer_list<uint64_t> values) {
  uint64_t hash = 0x636f6e7665796f72ULL;  // "conveyor"
  for (uint64_t value : values) hash = SplitMix64(hash ^ SplitMix64(value));
  return hash;
}

uint64_t UniformIndex(uint64_t hash, uint64_t n) {
  CONVEYOR_ASSERT(n >= 1) << "UniformIndex over an empty range";
  return static_cast<uint64_t>((static_cast<unsigned __int128>(hash) * n) >> 64);
}

double UniformUnit(uint64_t hash) { return static_cast<double>(hash >> 11) * 0x1.0p-53; }

uint64_t PermutedIndex(uint64_t index, uint64_t n, uint64_t key) {
  CONVEYOR_ASSERT(n >= 1 && index < n) << "index " << index << " of a permutation of " << n;
  int half = 1;  // bits of each half: 2^(2 half) >= n
  while (half < 32 && (uint64_t{1} << (2 * half)) < n) ++half;
  const uint64_t mask = (uint64_t{1} << half) - 1;
  constexpr int kRounds = 6;
  uint64_t x = index;
  do {  // a bijection of [0, 4^half); values past n walk on until they land inside
    uint64_t left = x >> half, right = x & mask;
    for (int round = 0; round < kRounds; ++round) {
      const uint64_t next = left ^ (HashOf({key, static_cast<uint64_t>(round), right}) & mask);
      left = right;
      right = next;
    }
    x = (left << half) | right;
  } while (x >= n);
  return x;
}

}  // namespace conveyor
