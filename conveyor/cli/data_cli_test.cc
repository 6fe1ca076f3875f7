// `conveyor data prepare` and `data check` end to end: text, blocks and JSON Lines into an
// indexed data set read back token for token; bad inputs refused with nothing written.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "conveyor/cli/cli_testing.h"
#include "conveyor/data/indexed_dataset.h"

namespace conveyor {
namespace {

namespace fs = std::filesystem;

std::string WriteInput(const std::string& dir, const std::string& name, const std::string& text) {
  const std::string path = dir + "/" + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

// The bytes of `text` and the newline that ends a document.
std::vector<int64_t> Bytes(const std::string& text) {
  std::vector<int64_t> tokens;
  for (const unsigned char byte : text) tokens.push_back(byte);
  tokens.push_back('\n');
  return tokens;
}

TEST(CliTest, DataPrepareWritesAnIndexedDataSetThatCheckCounts) {
  const std::string dir = ScratchWithCorpus("data_prepare");
  const std::string text = WriteInput(dir, "a.txt", "first\n\nsecond one\n");
  const std::string jsonl =
      WriteInput(dir, "b.jsonl", "{\"text\": \"caf\\u00e9\"}\n{\"text\": \"x\"}\n");
  const Result prepared = Conveyor("data prepare --input " + text + " " + jsonl +
                                   " --blank-line-blocks --out " + dir + "/set");
  ASSERT_EQ(prepared.code, 0) << prepared.err;
  EXPECT_NE(prepared.out.find("4 documents, 25 tokens (uint16)"), std::string::npos)
      << prepared.out;
  const IndexedDataset data(dir + "/set");
  ASSERT_EQ(data.num_documents(), 4);
  EXPECT_EQ(data.Read(0), Bytes("first"));
  EXPECT_EQ(data.Read(1), Bytes("second one"));
  EXPECT_EQ(data.Read(2), Bytes("caf\xc3\xa9"));
  EXPECT_EQ(data.Read(3), Bytes("x"));
  const Result checked = Conveyor("data check " + dir + "/set --vocab 256");
  ASSERT_EQ(checked.code, 0) << checked.err;
  EXPECT_NE(checked.out.find("4 documents, 4 sequences, 25 tokens (uint16), every token in "
                             "[0, 256)"),
            std::string::npos)
      << checked.out;
  // 0xC3 of the 'é' is the first token past a vocabulary of 128.
  const Result outside = Conveyor("data check " + dir + "/set --vocab 128");
  EXPECT_EQ(outside.code, 1);
  EXPECT_NE(outside.err.find("document 2, sequence 2, token 3: value 195 is outside the "
                             "vocabulary [0, 128)"),
            std::string::npos)
      << outside.err;
}

TEST(CliTest, DataPrepareRefusesBadInputAndWritesNothing) {
  const std::string dir = ScratchWithCorpus("data_bad");
  const std::string good = WriteInput(dir, "good.txt", "fine");
  const std::string bad = WriteInput(dir, "bad.jsonl", "{\"text\": \"a\"}\n{\"body\": \"b\"}\n");
  const Result result =
      Conveyor("data prepare --input " + good + " " + bad + " --out " + dir + "/set");
  EXPECT_EQ(result.code, 1);
  EXPECT_NE(result.err.find("bad.jsonl, line 2: no \"text\" in this line's object"),
            std::string::npos)
      << result.err;
  EXPECT_FALSE(fs::exists(dir + "/set.bin"));
  EXPECT_FALSE(fs::exists(dir + "/set.idx"));
  for (const auto& entry : fs::directory_iterator(dir)) {
    EXPECT_EQ(entry.path().string().find(".tmp"), std::string::npos) << entry.path();
  }
  const Result tokenizer =
      Conveyor("data prepare --input " + good + " --tokenizer gpt2 --out " + dir + "/set");
  EXPECT_EQ(tokenizer.code, 1);
  EXPECT_NE(tokenizer.err.find("--tokenizer 'gpt2'"), std::string::npos) << tokenizer.err;
  const Result missing = Conveyor("data check " + dir + "/nothing");
  EXPECT_EQ(missing.code, 1);
  EXPECT_NE(missing.err.find("cannot open " + dir + "/nothing.idx"), std::string::npos)
      << missing.err;
}

}  // namespace
}  // namespace conveyor
