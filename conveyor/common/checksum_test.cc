#include "conveyor/common/checksum.h"

#include <gtest/gtest.h>

#include <string>

namespace conveyor {
namespace {

uint64_t Of(const std::string& text) { return Fnv1a64(text.data(), text.size()); }

// The published test values of 64-bit FNV-1a.
TEST(ChecksumTest, MatchesFnv1aReferenceValues) {
  EXPECT_EQ(Of(""), 0xcbf29ce484222325ULL);
  EXPECT_EQ(Of("a"), 0xaf63dc4c8601ec8cULL);
  EXPECT_EQ(Of("foobar"), 0x85944171f73967e8ULL);
}

TEST(ChecksumTest, EveryFlippedBitChangesIt) {
  std::string bytes(64, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 37);
  const uint64_t clean = Of(bytes);
  for (size_t i = 0; i < bytes.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string flipped = bytes;
      flipped[i] = static_cast<char>(flipped[i] ^ (1 << bit));
      EXPECT_NE(Of(flipped), clean) << "byte " << i << " bit " << bit;
    }
  }
}

// The check value of CRC-32C ("123456789") and the test vectors of RFC 3720, B.4: 32 bytes
// of zeros, of ones, ascending and descending.
TEST(ChecksumTest, Crc32cMatchesReferenceValues) {
  EXPECT_EQ(Crc32c("123456789", 9), 0xe3069283u);
  EXPECT_EQ(Crc32c("", 0), 0u);
  std::string bytes(32, '\0');
  EXPECT_EQ(Crc32c(bytes.data(), bytes.size()), 0x8a9136aau);
  bytes.assign(32, '\xff');
  EXPECT_EQ(Crc32c(bytes.data(), bytes.size()), 0x62a8ab43u);
  for (int i = 0; i < 32; ++i) bytes[i] = static_cast<char>(i);
  EXPECT_EQ(Crc32c(bytes.data(), bytes.size()), 0x46dd794eu);
  for (int i = 0; i < 32; ++i) bytes[i] = static_cast<char>(31 - i);
  EXPECT_EQ(Crc32c(bytes.data(), bytes.size()), 0x113fdb5cu);
}

TEST(ChecksumTest, HexIsSixteenLowercaseDigits) {
  EXPECT_EQ(Hex64(0), "0000000000000000");
  EXPECT_EQ(Hex64(0xaf63dc4c8601ec8cULL), "af63dc4c8601ec8c");
}

}  // namespace
}  // namespace conveyor
