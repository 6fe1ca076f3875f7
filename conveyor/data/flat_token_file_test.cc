#include "conveyor/data/flat_token_file.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "conveyor/common/error.h"
#include "conveyor/common/scratch_folder_testing.h"
#include "conveyor/data/open_token_source.h"

namespace conveyor {
namespace {

// An llm.c file as its dev/data/data_common.py writes one: 256 int32 of header, then the
// tokens as uint16 (version 1) or uint32 (version 2).
std::string Llmc(const std::vector<uint32_t>& tokens, int32_t version, int32_t count = -1) {
  std::vector<int32_t> header(256, 0);
  header[0] = 20240520;
  header[1] = version;
  header[2] = count >= 0 ? count : static_cast<int32_t>(tokens.size());
  std::string bytes(reinterpret_cast<const char*>(header.data()), 1024);
  for (uint32_t token : tokens) {
    if (version == 1) {
      const uint16_t t = static_cast<uint16_t>(token);
      bytes.append(reinterpret_cast<const char*>(&t), 2);
    } else {
      bytes.append(reinterpret_cast<const char*>(&token), 4);
    }
  }
  return bytes;
}

// nanoGPT's: the uint16 tokens alone.
std::string NanoGpt(const std::vector<uint16_t>& tokens) {
  return std::string(reinterpret_cast<const char*>(tokens.data()), 2 * tokens.size());
}

std::vector<int64_t> ReadAll(const FlatTokenFile& file) {
  std::vector<int64_t> out(file.num_tokens());
  file.ReadStream(0, file.num_tokens(), out.data());
  return out;
}

class FlatTokenFileTest : public ::testing::Test {
 protected:
  ScratchFolder scratch_;
};

TEST_F(FlatTokenFileTest, LlmcAndNanoGptFilesReadTheirTokens) {
  const std::vector<uint32_t> tokens = {50256, 15496, 11, 995, 0, 65535};
  const FlatTokenFile v1(scratch_.Write("v1.bin", Llmc(tokens, 1)));
  EXPECT_TRUE(v1.llmc());
  EXPECT_EQ(v1.token_bytes(), 2);
  EXPECT_EQ(ReadAll(v1), std::vector<int64_t>(tokens.begin(), tokens.end()));
  const std::vector<uint32_t> wide = {128000, 9906, 128001, 4294967295u};
  const FlatTokenFile v2(scratch_.Write("v2.bin", Llmc(wide, 2)));
  EXPECT_EQ(v2.token_bytes(), 4);
  EXPECT_EQ(ReadAll(v2), std::vector<int64_t>(wide.begin(), wide.end()));
  const std::vector<uint16_t> raw = {1, 2, 50256, 7};
  const FlatTokenFile nano(scratch_.Write("nano.bin", NanoGpt(raw)));
  EXPECT_FALSE(nano.llmc());
  EXPECT_EQ(ReadAll(nano), std::vector<int64_t>(raw.begin(), raw.end()));
  std::vector<int64_t> middle(2);
  nano.ReadStream(1, 2, middle.data());
  EXPECT_EQ(middle, (std::vector<int64_t>{2, 50256}));
  EXPECT_THROW(nano.ReadStream(3, 2, middle.data()), UserError);
}

// No index: kFlatParts equal parts stand for documents, covering every token once.
TEST_F(FlatTokenFileTest, TheFileIsCutIntoEqualParts) {
  const FlatTokenFile small(scratch_.Write("small.bin", NanoGpt({1, 2, 3})));
  EXPECT_EQ(small.num_documents(), 3);  // fewer tokens than parts: one token each
  EXPECT_EQ(small.DocumentOffset(2), 2);
  std::vector<uint16_t> many(2503, 9);
  const FlatTokenFile large(scratch_.Write("large.bin", NanoGpt(many)));
  ASSERT_EQ(large.num_documents(), kFlatParts);
  EXPECT_EQ(large.DocumentOffset(0), 0);
  EXPECT_EQ(large.DocumentOffset(kFlatParts), 2503);
  for (int64_t j = 0; j < kFlatParts; ++j) {
    const int64_t size = large.DocumentOffset(j + 1) - large.DocumentOffset(j);
    ASSERT_TRUE(size == 2 || size == 3) << j;
  }
}

TEST_F(FlatTokenFileTest, BadFilesAreRefusedNamingFileAndPosition) {
  auto refused = [&](const std::string& name, const std::string& bytes, const std::string& words) {
    const std::string path = scratch_.Write(name, bytes);
    try {
      FlatTokenFile file(path);
      ADD_FAILURE() << name << " opened";
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  const std::string good = Llmc({1, 2, 3}, 1);
  refused("truncated_header.bin", good.substr(0, 100), "llm.c's header alone takes 1024");
  refused("version.bin", Llmc({1, 2, 3}, 3), "llm.c version 3 at byte 4");
  refused("short.bin", good.substr(0, good.size() - 2),
          "header counts 3 tokens at byte 8, the file holds 4 bytes");
  refused("long.bin", Llmc({1, 2, 3}, 1, 2), "header counts 2 tokens");
  refused("odd.bin", "abc", "3 bytes, not a whole number of nanoGPT's uint16 tokens");
  refused("empty.bin", "", "holds no tokens");
  refused("no_tokens.bin", Llmc({}, 1), "holds no tokens");
  const FlatTokenFile file(scratch_.Write("vocab.bin", NanoGpt({5, 300, 7})));
  std::vector<int64_t> tokens = ReadAll(file);
  try {
    file.CheckTokens(0, tokens, 256);
    ADD_FAILURE() << "300 accepted";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("token 1 (byte 2) is 300, outside the model's "
                                         "vocabulary [0, 256)"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(FlatTokenFileTest, OpenTokenSourceTellsTheKindsApart) {
  const std::string nano = scratch_.Write("a.bin", NanoGpt({1, 2}));
  EXPECT_TRUE(IsTokenSource(nano));
  EXPECT_FALSE(IsTokenSource(scratch_.Path("missing.bin")));
  EXPECT_FALSE(IsTokenSource(scratch_.Write("text.txt", "hello")));
  EXPECT_NE(OpenTokenSource(nano)->Describe().find("nanoGPT token file"), std::string::npos);
}

}  // namespace
}  // namespace conveyor
