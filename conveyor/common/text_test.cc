#include "conveyor/common/text.h"

#include <gtest/gtest.h>

namespace conveyor {
namespace {

TEST(TextTest, TrimDropsOuterWhitespaceOnly) {
  EXPECT_EQ(Trim("  0F1 \t\r\n"), "0F1");
  EXPECT_EQ(Trim("a b"), "a b");
  EXPECT_EQ(Trim(" \n "), "");
  EXPECT_EQ(Trim(""), "");
}

}  // namespace
}  // namespace conveyor
