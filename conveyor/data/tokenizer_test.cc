#include "conveyor/data/tokenizer.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "conveyor/common/error.h"
#include "conveyor/common/scratch_folder_testing.h"
#include "conveyor/data/byte_tokenizer.h"
#include "conveyor/data/data_testing.h"
#include "conveyor/data/load_tokenizer.h"
#include "conveyor/data/sentencepiece_tokenizer.h"

namespace conveyor {
namespace {

TEST(TokenizerTest, TheByteTokenizerEndsDocumentsWithANewlineAndStartsPromptsWithOne) {
  const std::unique_ptr<Tokenizer> bytes = LoadTokenizer("bytes");
  EXPECT_EQ(bytes->vocab_size(), 256);
  EXPECT_EQ(LoadTokenizer("")->Describe(), bytes->Describe());
  EXPECT_EQ(DocumentTokens(*bytes, "ab"), (std::vector<int64_t>{'a', 'b', '\n'}));
  EXPECT_EQ(PromptTokens(*bytes, "ab"), (std::vector<int64_t>{'a', 'b'}));
  EXPECT_EQ(PromptTokens(*bytes, ""), (std::vector<int64_t>{'\n'}));
}

TEST(TokenizerTest, ASentencePieceDocumentIsBosTextEos) {
  if (!HaveSentencePiece()) GTEST_SKIP() << "this build has no SentencePiece";
  ScratchFolder scratch;
  const std::unique_ptr<Tokenizer> model = LoadTokenizer(TrainTestTokenizer(scratch.path(), 400));
  const std::vector<int64_t> text = model->Encode("the stages");
  std::vector<int64_t> document = {1};
  document.insert(document.end(), text.begin(), text.end());
  EXPECT_EQ(PromptTokens(*model, "the stages"), document);
  document.push_back(2);
  EXPECT_EQ(DocumentTokens(*model, "the stages"), document);
  EXPECT_EQ(PromptTokens(*model, ""), (std::vector<int64_t>{1}));
  // A folder with a tokenizer.model (a model folder) names it; one without is refused.
  EXPECT_EQ(LoadTokenizer(scratch.path())->Encode("the stages"), text);
  scratch.Write("empty/x", "");
  try {
    LoadTokenizer(scratch.Path("empty"));
    ADD_FAILURE() << "a folder without a model loaded";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("a folder without a tokenizer.model"), std::string::npos)
        << e.what();
  }
}

TEST(TokenizerTest, ATokenizerLargerThanTheModelIsRefusedNamingBothSizes) {
  const ByteTokenizer bytes;
  CheckTokenizerFits(bytes, 256, "here");
  CheckTokenizerFits(bytes, 50257, "here");  // a padded vocabulary is fine
  try {
    CheckTokenizerFits(bytes, 200, "--tokenizer bytes");
    ADD_FAILURE() << "256 ids fit 200 rows";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("--tokenizer bytes: the tokenizer (bytes (256 ids)) has "
                                         "256 ids but the model's vocabulary only 200 rows"),
              std::string::npos)
        << e.what();
  }
}

TEST(TokenizerTest, TokenIdsAreParsedAndBadOnesNamed) {
  EXPECT_EQ(ParseTokenIds("1,2, 3 4", 10, "ids"), (std::vector<int64_t>{1, 2, 3, 4}));
  for (const std::string bad : {"10", "-1", "x", "1.5", ""}) {
    EXPECT_THROW(ParseTokenIds(bad, 10, "ids"), UserError) << bad;
  }
  try {
    ParseTokenIds("3,12", 10, "--prompt-tokens");
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("--prompt-tokens: '12' is not a token id of this "
                                         "vocabulary (0 to 9)"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace conveyor
