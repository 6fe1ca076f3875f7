#include "conveyor/common/checksum.h"

#include <cstdio>

namespace conveyor {

uint64_t Fnv1a64(const void* data, size_t bytes) {
  constexpr uint64_t kOffsetBasis = 0xcbf29ce484222325ULL;
  constexpr uint64_t kPrime = 0x100000001b3ULL;
  const unsigned char* p = static_cast<const unsigned char*>(data);
  uint64_t hash = kOffsetBasis;
  for (size_t i = 0; i < bytes; ++i) {
    hash ^= p[i];
    hash *= kPrime;
  }
  return hash;
}

std::string Hex64(uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(value));
  return text;
}

}  // namespace conveyor
