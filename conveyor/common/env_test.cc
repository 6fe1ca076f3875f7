#include "conveyor/common/env.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <functional>
#include <string>
#include <string_view>

#include "conveyor/common/error.h"

namespace conveyor {
namespace {

using ::testing::HasSubstr;

constexpr char kVariable[] = "CONVEYOR_ENV_TEST_VARIABLE";

// Sets kVariable for one test and removes it afterwards.
class EnvTest : public ::testing::Test {
 protected:
  void TearDown() override { unsetenv(kVariable); }
  void Set(const char* value) { ASSERT_EQ(setenv(kVariable, value, 1), 0); }
};

// Matches a UserError whose message holds `text`.
::testing::Matcher<std::function<void()>> Refused(const std::string& text) {
  return ::testing::ThrowsMessage<UserError>(HasSubstr(text));
}

// ParseEnvInt("N", value, 0, 9), to be matched with Refused().
std::function<void()> ParseDigit(std::string_view value) {
  return [value] { ParseEnvInt("N", value, 0, 9); };
}

TEST(ParseEnvIntTest, ReadsDecimalIntegersInRange) {
  EXPECT_EQ(ParseEnvInt("N", "42", 0, 100), 42);
  EXPECT_EQ(ParseEnvInt("N", "-3", -5, 5), -3);
  EXPECT_EQ(ParseEnvInt("N", "9000000000", 0, INT64_MAX), 9000000000);
}

TEST(ParseEnvIntTest, RefusesMalformedAndOutOfRangeValuesNamingThem) {
  EXPECT_THAT(ParseDigit("x1"), Refused("environment variable N=\"x1\" is not an integer"));
  EXPECT_THAT(ParseDigit("1x"), Refused("N=\"1x\" is not an integer"));
  EXPECT_THAT(ParseDigit(" 1"), Refused("N=\" 1\" is not an integer"));
  EXPECT_THAT(ParseDigit(""), Refused("N=\"\" is not an integer"));
  EXPECT_THAT(ParseDigit("99999999999999999999"), Refused("is not an integer"));
  EXPECT_THAT(ParseDigit("10"), Refused("environment variable N must be within [0, 9], got 10"));
}

TEST_F(EnvTest, EnvIntFallsBackOnlyWhenUnset) {
  EXPECT_EQ(EnvInt(kVariable, -1, 0, 10), -1);
  Set("7");
  EXPECT_EQ(EnvInt(kVariable, -1, 0, 10), 7);
  Set("seven");
  EXPECT_THROW(EnvInt(kVariable, -1, 0, 10), UserError);
  Set("11");
  EXPECT_THROW(EnvInt(kVariable, -1, 0, 10), UserError);
}

TEST_F(EnvTest, EnvFlagReadsSwitchWords) {
  EXPECT_TRUE(EnvFlag(kVariable, true));
  EXPECT_FALSE(EnvFlag(kVariable, false));
  for (const char* on : {"1", "on", "true", "yes"}) {
    Set(on);
    EXPECT_TRUE(EnvFlag(kVariable, false)) << on;
  }
  for (const char* off : {"0", "off", "false", "no"}) {
    Set(off);
    EXPECT_FALSE(EnvFlag(kVariable, true)) << off;
  }
  Set("maybe");
  EXPECT_THAT([] { EnvFlag(kVariable, true); },
              Refused(std::string(kVariable) + "=\"maybe\" is not a switch"));
}

TEST_F(EnvTest, ProcessEnvironmentHoldsTheVariables) {
  Set("a=b");
  EXPECT_EQ(ProcessEnvironment().at(kVariable), "a=b");
  unsetenv(kVariable);
  EXPECT_EQ(ProcessEnvironment().count(kVariable), 0u);
}

}  // namespace
}  // namespace conveyor
