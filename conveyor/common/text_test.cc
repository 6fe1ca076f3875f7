#include "conveyor/common/text.h"

#include <gtest/gtest.h>

namespace conveyor {
namespace {

TEST(TextTest, PadColumnPadsShortTextAndKeepsLongTextWhole) {
  EXPECT_EQ(PadColumn("1f1b", 6), "1f1b   ");
  EXPECT_EQ(PadColumn("interleaved-zero-bubble", 6), "interleaved-zero-bubble ");
  EXPECT_EQ(PadColumn("", 2), "   ");
}

TEST(TextTest, TrimDropsOuterWhitespaceOnly) {
  EXPECT_EQ(Trim("  0F1 \t\r\n"), "0F1");
  EXPECT_EQ(Trim("a b"), "a b");
  EXPECT_EQ(Trim(" \n "), "");
  EXPECT_EQ(Trim(""), "");
}

}  // namespace
}  // namespace conveyor
