#include "conveyor/data/byte_tokenizer.h"

#include <gtest/gtest.h>

#include "conveyor/common/error.h"

namespace conveyor {
namespace {

TEST(ByteTokenizerTest, EncodesOneTokenPerByte) {
  const ByteTokenizer tokenizer;
  EXPECT_EQ(tokenizer.vocab_size(), 256);
  EXPECT_EQ(tokenizer.Encode("Az\n"), (std::vector<int64_t>{65, 122, 10}));
  EXPECT_EQ(tokenizer.Encode("\xC3\xA9"), (std::vector<int64_t>{0xC3, 0xA9}));  // é
  EXPECT_TRUE(tokenizer.Encode("").empty());
}

TEST(ByteTokenizerTest, EveryByteRoundTrips) {
  const ByteTokenizer tokenizer;
  std::string all;
  for (int b = 255; b >= 0; --b) all.push_back(static_cast<char>(b));
  const std::vector<int64_t> tokens = tokenizer.Encode(all);
  ASSERT_EQ(tokens.size(), 256u);
  EXPECT_EQ(tokens.front(), 255);
  EXPECT_EQ(tokens.back(), 0);
  EXPECT_EQ(tokenizer.Decode(tokens), all);
}

TEST(ByteTokenizerTest, DecodeRejectsTokensOutsideVocabulary) {
  const ByteTokenizer tokenizer;
  const std::vector<int64_t> tokens = {72, 256};
  try {
    tokenizer.Decode(tokens);
    FAIL() << "token 256 accepted";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("token 256 at position 1"), std::string::npos) << e.what();
  }
  EXPECT_THROW(tokenizer.Decode(std::vector<int64_t>{-1}), UserError);
}

TEST(ByteTokenizerTest, PrintableKeepsValidUtf8AndEscapesTheRest) {
  EXPECT_EQ(ByteTokenizer::Printable("caf\xC3\xA9\n\tok"), "caf\xC3\xA9\n\tok");
  EXPECT_EQ(ByteTokenizer::Printable(std::string("a\0b\x1b", 4)), "a\\x00b\\x1B");
  EXPECT_EQ(ByteTokenizer::Printable("\xFF\xC3"), "\\xFF\\xC3");           // invalid, truncated
  EXPECT_EQ(ByteTokenizer::Printable("\xC0\xAF"), "\\xC0\\xAF");           // overlong '/'
  EXPECT_EQ(ByteTokenizer::Printable("\xED\xA0\x80"), "\\xED\\xA0\\x80");  // surrogate
  EXPECT_EQ(ByteTokenizer::Printable("\xF0\x9F\x98\x80"), "\xF0\x9F\x98\x80");  // emoji
}

}  // namespace
}  // namespace conveyor
