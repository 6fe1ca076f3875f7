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

TEST(TextTest, Utf8ValidationFollowsTheStandard) {
  EXPECT_FALSE(FirstInvalidUtf8("plain, \xc3\xa9, \xe2\x82\xac, \xf0\x9f\x98\x80"));
  EXPECT_EQ(FirstInvalidUtf8("a\xc0\xaf"), 1u);         // overlong '/'
  EXPECT_EQ(FirstInvalidUtf8("ab\xed\xa0\x80"), 2u);    // a surrogate
  EXPECT_EQ(FirstInvalidUtf8("\xf4\x90\x80\x80"), 0u);  // past U+10FFFF
  EXPECT_EQ(FirstInvalidUtf8("\xe2\x28\xa1"), 0u);      // a bad continuation
  EXPECT_EQ(FirstInvalidUtf8("xyz\x80"), 3u);           // a lone continuation
  EXPECT_EQ(FirstInvalidUtf8("\xe0\x9f\x80"), 0u);      // overlong three bytes
}

}  // namespace
}  // namespace conveyor
