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

// What a user reads: one line (libtorch's backtrace after the first line dropped); an
// InternalError says it is a bug, once, however often it was wrapped.
TEST(ErrorTest, ErrorLineIsOneLineAndNamesABug) {
  EXPECT_EQ(ErrorLine(std::runtime_error("CUDA out of memory.\nException raised from malloc")),
            "CUDA out of memory.");
  EXPECT_EQ(ErrorLine(UserError("--layers must be within [1, 4096], got 0")),
            "--layers must be within [1, 4096], got 0");
  const std::string bug = ErrorLine(InternalError("stage 3 held 2 micro-batches"));
  EXPECT_EQ(bug, std::string(kInternalErrorNote) + "stage 3 held 2 micro-batches");
  EXPECT_EQ(ErrorLine(InternalError("rank 1: " + bug)), "rank 1: " + bug);
}

// Running out of memory reads as such, with what conveyor said of where it happened.
TEST(ErrorTest, OutOfMemoryIsSaidInOneLine) {
  EXPECT_EQ(ErrorLine(std::runtime_error(
                "rank 0, stage 0, micro-batch 0, action 0F0: [enforce fail at alloc_cpu.cpp:75] "
                "err == 0. DefaultCPUAllocator: can't allocate memory: you tried to allocate "
                "68719476736 bytes. Error code 12 (Cannot allocate memory)\nframe #0: ...")),
            "rank 0, stage 0, micro-batch 0, action 0F0: out of memory: a tensor of 64.0 GiB "
            "(68719476736 bytes) could not be allocated");
  EXPECT_EQ(ErrorLine(std::bad_alloc()),
            "out of memory (std::bad_alloc): an allocation was refused");
}

}  // namespace
}  // namespace conveyor
