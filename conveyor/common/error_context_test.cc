#include "conveyor/common/error_context.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace conveyor {
namespace {

TEST(ErrorContextTest, AUserErrorGetsTheContextAndAResultPassesThrough) {
  EXPECT_EQ(WithErrorContext("rank 0", [] { return 7; }), 7);
  try {
    WithErrorContext("rank 0, stage 1, building its layers",
                     [] { CONVEYOR_CHECK(false) << "memory limit: 32 bytes more"; });
    FAIL() << "nothing thrown";
  } catch (const UserError& e) {
    EXPECT_EQ(std::string(e.what()),
              "rank 0, stage 1, building its layers: memory limit: 32 bytes more");
  }
  // Not a refusal of the user's input: unchanged.
  EXPECT_THROW(WithErrorContext("rank 0", [] { throw std::out_of_range("x"); }), std::out_of_range);
}

}  // namespace
}  // namespace conveyor
