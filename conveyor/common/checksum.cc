#include "conveyor/common/checksum.h"

#include <array>
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

namespace {

// The CRC of every byte value, bit by bit (least significant first: the reflected form).
constexpr std::array<uint32_t, 256> Crc32cTable() {
  constexpr uint32_t kPolynomial = 0x82f63b78u;
  std::array<uint32_t, 256> table{};
  for (uint32_t byte = 0; byte < 256; ++byte) {
    uint32_t crc = byte;
    for (int bit = 0; bit < 8; ++bit) crc = (crc & 1) ? (crc >> 1) ^ kPolynomial : crc >> 1;
    table[byte] = crc;
  }
  return table;
}

constexpr std::array<uint32_t, 256> kCrc32cTable = Crc32cTable();

}  // namespace

uint32_t Crc32c(const void* data, size_t bytes) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  uint32_t crc = 0xffffffffu;
  for (size_t i = 0; i < bytes; ++i) crc = kCrc32cTable[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
  return crc ^ 0xffffffffu;
}

std::string Hex64(uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(value));
  return text;
}

}  // namespace conveyor
