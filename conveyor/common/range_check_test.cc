#include "conveyor/common/range_check.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "conveyor/common/error.h"

namespace conveyor {
namespace {

// The message of the UserError `check` throws, or "" when it throws none.
template <typename F>
std::string Refusal(F&& check) {
  try {
    check();
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

TEST(RangeCheckTest, IntegersWithinTheRangePass) {
  EXPECT_NO_THROW(CheckInRange("--pp", 1, 1, 4096));
  EXPECT_NO_THROW(CheckInRange("--pp", 4096, 1, 4096));
  EXPECT_NO_THROW(CheckInRange("--seed", uint64_t{0}, 0, std::numeric_limits<int64_t>::max()));
}

TEST(RangeCheckTest, IntegerMessageNamesSettingRangeAndValue) {
  EXPECT_EQ(Refusal([] { CheckInRange("--pp", 100000, 1, 4096); }),
            "--pp must be within [1, 4096], got 100000");
  EXPECT_EQ(Refusal([] { CheckInRange("run.toml: layers", int64_t{4294967298}, 1, 4096); }),
            "run.toml: layers must be within [1, 4096], got 4294967298");
}

TEST(RangeCheckTest, UnsignedValuesCompareExactly) {
  // -1 read into a uint64_t: huge, not negative, and out of range.
  const uint64_t wrapped = static_cast<uint64_t>(-1);
  EXPECT_EQ(Refusal([&] { CheckInRange("--seed", wrapped, 0, 100); }),
            "--seed must be within [0, 100], got 18446744073709551615");
}

TEST(RangeCheckTest, RealsMustBeFiniteAndWithin) {
  EXPECT_NO_THROW(CheckInRange("--mem-w", 0.5, 0, 1));
  EXPECT_EQ(Refusal([] { CheckInRange("--mem-w", 1.5, 0, 1); }),
            "--mem-w must be within [0, 1], got 1.5");
  EXPECT_NE(Refusal([] { CheckInRange("--f", std::numeric_limits<double>::infinity(), 0, 1e15); }),
            "");
  EXPECT_NE(Refusal([] { CheckInRange("--f", std::nan(""), 0, 1e15); }), "");
}

TEST(RangeCheckTest, PositiveUpToRefusesZero) {
  EXPECT_NO_THROW(CheckPositiveUpTo("--lr", 3e-3, 10));
  EXPECT_EQ(Refusal([] { CheckPositiveUpTo("--lr", 0, 10); }),
            "--lr must be within (0, 10], got 0");
  EXPECT_EQ(Refusal([] { CheckPositiveUpTo("--lr", std::numeric_limits<double>::infinity(), 10); }),
            "--lr must be within (0, 10], got inf");
}

}  // namespace
}  // namespace conveyor
