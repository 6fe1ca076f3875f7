#include "conveyor/common/env.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>

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

std::string ParseError(std::string_view value, int64_t min, int64_t max) {
  try {
    ParseEnvInt("N", value, min, max);
  } catch (const UserError& e) {
    return e.what();
  }
  return "no error";
}

TEST(ParseEnvIntTest, ReadsDecimalIntegersInRange) {
  EXPECT_EQ(ParseEnvInt("N", "42", 0, 100), 42);
  EXPECT_EQ(ParseEnvInt("N", "-3", -5, 5), -3);
  EXPECT_EQ(ParseEnvInt("N", "9000000000", 0, INT64_MAX), 9000000000);
}

TEST(ParseEnvIntTest, RefusesMalformedAndOutOfRangeValuesNamingThem) {
  EXPECT_THAT(ParseError("x1", 0, 9), HasSubstr("environment variable N=\"x1\" is not an integer"));
  EXPECT_THAT(ParseError("1x", 0, 9), HasSubstr("N=\"1x\" is not an integer"));
  EXPECT_THAT(ParseError(" 1", 0, 9), HasSubstr("is not an integer"));
  EXPECT_THAT(ParseError("", 0, 9), HasSubstr("N=\"\" is not an integer"));
  EXPECT_THAT(ParseError("99999999999999999999", 0, 9), HasSubstr("is not an integer"));
  EXPECT_THAT(ParseError("10", 0, 9),
              HasSubstr("environment variable N must be within [0, 9], got 10"));
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
  try {
    EnvFlag(kVariable, true);
    ADD_FAILURE() << "\"maybe\" read as a switch";
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), HasSubstr(std::string(kVariable) + "=\"maybe\" is not a switch"));
  }
}

TEST_F(EnvTest, ProcessEnvironmentHoldsTheVariables) {
  Set("a=b");
  EXPECT_EQ(ProcessEnvironment().at(kVariable), "a=b");
  unsetenv(kVariable);
  EXPECT_EQ(ProcessEnvironment().count(kVariable), 0u);
}

}  // namespace
}  // namespace conveyor
