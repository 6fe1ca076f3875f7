#include "conveyor/cli/bytes_flag.h"

#include <gtest/gtest.h>

#include <string>

namespace conveyor {
namespace {

// What a byte-count flag makes of its value: "" and the value rewritten in bytes, or an
// error naming it.
std::pair<std::string, std::string> Read(std::string value) {
  const std::string error = BytesFlag()(value);
  return {error, value};
}

TEST(BytesFlagTest, TakesPlainNumbersAndUnits) {
  EXPECT_EQ(Read("1e9"), std::make_pair(std::string(), std::string("1000000000")));
  EXPECT_EQ(Read("500000"), std::make_pair(std::string(), std::string("500000")));
  EXPECT_EQ(Read("2.5e3"), std::make_pair(std::string(), std::string("2500")));
  EXPECT_EQ(Read("64KiB"), std::make_pair(std::string(), std::string("65536")));
  EXPECT_EQ(Read("2GB"), std::make_pair(std::string(), std::string("2000000000")));
}

TEST(BytesFlagTest, RefusesNegativeAndUnknownValuesNamingThem) {
  EXPECT_NE(Read("-5").first.find("-5"), std::string::npos);
  EXPECT_NE(Read("inf").first, "");
  EXPECT_NE(Read("12 parsecs").first, "");
}

}  // namespace
}  // namespace conveyor
