#include "conveyor/data/sentencepiece_tokenizer.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "conveyor/common/error.h"
#include "conveyor/common/scratch_folder_testing.h"
#include "conveyor/data/data_testing.h"

namespace conveyor {
namespace {

namespace fs = std::filesystem;

class SentencePieceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HaveSentencePiece()) GTEST_SKIP() << "this build has no SentencePiece";
  }
  ScratchFolder scratch_;
};

// The texts every round trip is checked on: ASCII, digits, accents, CJK, an emoji (outside
// any piece learned from English: byte fallback), tabs and runs of spaces.
const std::vector<std::string> kTexts = {
    "Pipeline parallelism splits the layers into stages.",
    "step 1234: loss 2.71828, 99% of 4096 tokens",
    "caf\xc3\xa9 na\xc3\xaf"
    "ve \xe6\xbc\xa2\xe5\xad\x97 \xf0\x9f\x9a\x82",
    "  two  spaces\tand a tab  ",
};

TEST_F(SentencePieceTest, ATrainedModelEncodesAsTheLibrarysOwnCommandAndRoundTrips) {
  const std::string model = TrainTestTokenizer(scratch_.path(), 600);
  const SentencePieceTokenizer tokenizer(model);
  EXPECT_EQ(tokenizer.vocab_size(), 600);
  EXPECT_EQ(tokenizer.bos_id(), 1);
  EXPECT_EQ(tokenizer.eos_id(), 2);
  EXPECT_EQ(tokenizer.end_of_document(), 2);
  for (const std::string& text : kTexts) {
    const std::vector<int64_t> ids = tokenizer.Encode(text);
    for (int64_t id : ids) {
      ASSERT_GE(id, 3) << text;  // never unknown (0), never a special id
      ASSERT_LT(id, 600) << text;
    }
    EXPECT_EQ(tokenizer.Decode(ids), text);  // identity normalization: exactly the text
    if (HaveSpmEncode()) {
      EXPECT_EQ(ids, SpmEncode(model, text)) << text;
    }
  }
  // English it was trained on takes fewer tokens than bytes.
  EXPECT_LT(tokenizer.Encode(kTexts[0]).size(), kTexts[0].size() / 2);
}

TEST_F(SentencePieceTest, AUnigramModelTrainsToo) {
  SentencePieceTrainOptions options;
  options.inputs = ProjectTextFiles();
  options.vocab_size = 500;
  options.model_type = "unigram";
  const std::string path = scratch_.Path("unigram.model");
  TrainSentencePiece(options, path);
  const SentencePieceTokenizer tokenizer(path);
  EXPECT_EQ(tokenizer.vocab_size(), 500);
  for (const std::string& text : kTexts) EXPECT_EQ(tokenizer.Decode(tokenizer.Encode(text)), text);
}

TEST_F(SentencePieceTest, EncodingFromSeveralThreadsGivesTheSameIds) {
  const SentencePieceTokenizer tokenizer(TrainTestTokenizer(scratch_.path(), 400));
  const std::vector<int64_t> expected = tokenizer.Encode(kTexts[0] + kTexts[2]);
  std::vector<std::vector<int64_t>> got(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int k = 0; k < 200; ++k) got[t] = tokenizer.Encode(kTexts[0] + kTexts[2]);
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (const auto& ids : got) EXPECT_EQ(ids, expected);
}

TEST_F(SentencePieceTest, BadModelsAndIdsAreRefusedByName) {
  const std::string missing = scratch_.Path("missing.model");
  try {
    SentencePieceTokenizer tokenizer(missing);
    ADD_FAILURE() << "a missing model loaded";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("tokenizer " + missing), std::string::npos) << e.what();
  }
  const std::string garbage = scratch_.Write("garbage.model", "this is not a protobuf \x01\x02");
  EXPECT_THROW(SentencePieceTokenizer tokenizer(garbage), UserError);
  const SentencePieceTokenizer tokenizer(TrainTestTokenizer(scratch_.path(), 400));
  const std::vector<int64_t> outside = {5, 400};
  try {
    tokenizer.Decode(outside);
    ADD_FAILURE() << "id 400 decoded";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("token 400 at position 1 is outside the vocabulary "
                                         "[0, 400)"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(SentencePieceTest, BadTrainingOptionsAreRefusedAndWriteNothing) {
  SentencePieceTrainOptions options;
  options.inputs = ProjectTextFiles();
  const std::string out = scratch_.Path("never.model");
  auto refuses = [&](const std::string& words) {
    try {
      TrainSentencePiece(options, out);
      ADD_FAILURE() << "trained; expected: " << words;
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
    EXPECT_FALSE(fs::exists(out));
  };
  options.vocab_size = 100;
  refuses("--vocab-size 100");
  options.vocab_size = 600;
  options.model_type = "wordpiece";
  refuses("--model-type 'wordpiece'");
  options.model_type = "bpe";
  options.inputs = {scratch_.Write("empty.txt", "")};
  refuses("no text");
  // More pieces than a tiny corpus can make: the library's own reason.
  options.inputs = {scratch_.Write("tiny.txt", "ab ab ab\nba ba\n")};
  options.vocab_size = 5000;
  refuses("SentencePiece refused to train a bpe model of 5000 pieces on 2 lines");
}

}  // namespace
}  // namespace conveyor
