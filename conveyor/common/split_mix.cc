#include "conveyor/common/split_mix.h"

namespace conveyor {

uint64_t SplitMixFinalize(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t SplitMix64(uint64_t x) { return SplitMixFinalize(x + kSplitMixGamma); }

}  // namespace conveyor
