#include "conveyor/common/error.h"

#include <gtest/gtest.h>

namespace conveyor {
namespace {

TEST(ErrorTest, CheckThrowsUserErrorWithStreamedValues) {
  const int pp = 3;
  try {
    CONVEYOR_CHECK(pp % 2 == 0) << "pp must be even, got " << pp;
    FAIL() << "CONVEYOR_CHECK did not throw";
  } catch (const UserError& e) {
    EXPECT_EQ(std::string(e.what()), "pp must be even, got 3");
  }
}

TEST(ErrorTest, PassingCheckDoesNotThrowOrEvaluateMessage) {
  int evaluated = 0;
  auto touch = [&] { return ++evaluated; };
  EXPECT_NO_THROW(CONVEYOR_CHECK(true) << touch());
  EXPECT_EQ(evaluated, 0);
}

TEST(ErrorTest, AssertThrowsInternalErrorNamingCondition) {
  try {
    CONVEYOR_ASSERT(1 + 1 == 3) << "math";
    FAIL() << "CONVEYOR_ASSERT did not throw";
  } catch (const InternalError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("1 + 1 == 3"), std::string::npos) << what;
    EXPECT_NE(what.find("math"), std::string::npos) << what;
    EXPECT_NE(what.find("error_test.cc"), std::string::npos) << what;
  }
}

TEST(ErrorTest, BothDeriveFromError) {
  EXPECT_THROW(CONVEYOR_CHECK(false), Error);
  EXPECT_THROW(CONVEYOR_ASSERT(false), Error);
}

}  // namespace
}  // namespace conveyor
