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

}  // namespace conveyor
