// LoadTokenizer and FolderTokenizer: which tokenizer a name or a Hugging Face model folder
// gives, and the one-line refusal of a Hugging Face tokenizers file (tokenizer.json).
#include "conveyor/data/load_tokenizer.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "conveyor/common/error.h"
#include "conveyor/common/scratch_folder_testing.h"
#include "conveyor/data/byte_tokenizer.h"

namespace conveyor {
namespace {

// The message of the UserError `f` throws; "" (and a test failure) when it throws none.
template <typename F>
std::string Refusal(F f) {
  try {
    f();
  } catch (const UserError& e) {
    return e.what();
  }
  ADD_FAILURE() << "not refused";
  return "";
}

constexpr char kTokenizerJson[] = R"({"version": "1.0", "model": {"type": "BPE"}})";

TEST(FolderTokenizerTest, AFolderGivesItsTokenizerModelOrNone) {
  ScratchFolder scratch;
  EXPECT_EQ(FolderTokenizer(scratch.path(), "--model"), "");
  const std::string model = scratch.Write("tokenizer.model", "not parsed here");
  scratch.Write("tokenizer.json", kTokenizerJson);  // beside a tokenizer.model: not used
  EXPECT_EQ(FolderTokenizer(scratch.path(), "--model"), model);
}

// Llama 3's and Qwen's folders hold tokenizer.json alone: refused in one line naming the flag,
// the folder and what to pass instead, never read as bytes.
TEST(FolderTokenizerTest, ATokenizerJsonAloneIsRefusedInOneLine) {
  ScratchFolder scratch;
  scratch.Write("config.json", "{}");
  scratch.Write("tokenizer.json", kTokenizerJson);
  const std::string expected =
      "--model " + scratch.path() +
      " holds tokenizer.json (a Hugging Face tokenizers tokenizer) and no tokenizer.model; "
      "conveyor reads SentencePiece models only: pass --tokenizer bytes (for data already "
      "tokenized) or --tokenizer a SentencePiece tokenizer.model";
  EXPECT_EQ(Refusal([&] { FolderTokenizer(scratch.path(), "--model"); }), expected);
  const std::string from_load = Refusal([&] { LoadTokenizer(scratch.path()); });
  EXPECT_EQ(from_load.find('\n'), std::string::npos) << from_load;
  EXPECT_EQ(from_load.rfind("tokenizer " + scratch.path() + " holds tokenizer.json", 0), 0u)
      << from_load;
  const std::string file = Refusal([&] { LoadTokenizer(scratch.Path("tokenizer.json")); });
  EXPECT_EQ(file, "tokenizer " + scratch.Path("tokenizer.json") +
                      " is a Hugging Face tokenizers file, not a SentencePiece model; conveyor "
                      "reads SentencePiece models only: pass --tokenizer bytes (for data already "
                      "tokenized) or --tokenizer a SentencePiece tokenizer.model");
}

TEST(LoadTokenizerTest, BytesAndFoldersWithoutATokenizer) {
  EXPECT_NE(dynamic_cast<ByteTokenizer*>(LoadTokenizer("bytes").get()), nullptr);
  EXPECT_NE(dynamic_cast<ByteTokenizer*>(LoadTokenizer("").get()), nullptr);
  ScratchFolder scratch;
  EXPECT_NE(Refusal([&] { LoadTokenizer(scratch.path()); })
                .find("a folder without a "
                      "tokenizer.model"),
            std::string::npos);
}

}  // namespace
}  // namespace conveyor
