// SentencePieceTokenizer and TrainSentencePiece: training with Llama's choices, round trips,
// threads, refusals, and agreement with the Python sentencepiece library and transformers'
// Llama tokenizer on the models it trains (the reference environment).
#include "conveyor/data/sentencepiece_tokenizer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "conveyor/common/error.h"
#include "conveyor/common/reference_env_testing.h"
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

// Texts for the libraries' checks: kTexts and harder ones: combining marks, compatibility
// characters (identity normalization keeps them), whitespace runs at either end and inside,
// newlines, digit runs, characters no piece holds (control, private use: byte fallback),
// the special pieces' and the meta symbol's text, nothing.
std::vector<std::string> LibraryTexts() {
  std::vector<std::string> texts = kTexts;
  for (const char* text : {
           "e\xcc\x81 combining, \xef\xac\x81 ligature, \xe2\x91\xa0 circled, "
           "\xef\xbc\xa1\xef\xbc\xa2 fullwidth, \xd0\x9f\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82",
           " one leading space",
           "   three leading   ",
           "\tleading tab",
           "trailing newline\n",
           "a\n\nb \n c",
           "00000000001 3.14159 -42",
           "control \x01\x7f and private \xee\x80\x80 and \xf4\x8f\xbf\xbd",
           "<s> and </s> and <unk> as text",
           "\xe2\x96\x81 the meta symbol",
           "",
       }) {
    texts.emplace_back(text);
  }
  return texts;
}

// What a text decodes to after encoding: itself, but that SentencePiece writes a space as its
// meta symbol U+2581 and so reads that symbol in a text as a space.
std::string Decoded(std::string text) {
  for (size_t at; (at = text.find("\xe2\x96\x81")) != std::string::npos;) {
    text.replace(at, 3, " ");
  }
  return text;
}

// Runs testdata/reference/sentencepiece_tokenizers.py on dir/tokenizer.model: the libraries'
// encodings of `texts` and decodings of `ids`.
nlohmann::json RunLibraries(const std::string& dir, const std::vector<std::string>& texts,
                            const std::vector<std::vector<int64_t>>& ids, bool transformers) {
  std::ofstream(dir + "/job.json") << nlohmann::json{{"texts", texts}, {"ids", ids}}.dump();
  const ReferenceRun run = RunReferenceScript("sentencepiece_tokenizers.py",
                                              dir + " " + dir + "/job.json " + dir + "/out.json" +
                                                  (transformers ? "" : " --no-transformers"));
  EXPECT_TRUE(run.ok()) << run.output;
  if (!run.ok()) return nlohmann::json::object();
  return nlohmann::json::parse(std::ifstream(dir + "/out.json"));
}

// A bpe model `conveyor tokenizer train` makes (TrainSentencePiece) encodes and decodes as the
// Python sentencepiece library does, and as transformers' Llama tokenizer loaded from a folder
// holding it, but where transformers itself departs from SentencePiece: a leading space or
// meta symbol it takes as the prefix SentencePiece adds, and the special pieces' text it reads
// as those ids. It adds no BOS from a bare tokenizer.model (conveyor's documents start with one).
TEST_F(SentencePieceTest, TheLibrariesUsersRunEncodeAndDecodeABpeModelAsConveyorDoes) {
  CONVEYOR_SKIP_WITHOUT_REFERENCE_ENV();
  const std::string model = TrainTestTokenizer(scratch_.path(), 600);
  const SentencePieceTokenizer tokenizer(model);
  const std::vector<std::string> texts = LibraryTexts();
  std::vector<std::vector<int64_t>> ids;
  for (const std::string& text : texts) ids.push_back(tokenizer.Encode(text));
  const nlohmann::json out = RunLibraries(scratch_.path(), texts, ids, true);
  ASSERT_TRUE(out.contains("transformers")) << out.dump();
  for (const char* library : {"sentencepiece", "transformers"}) {
    SCOPED_TRACE(library);
    const nlohmann::json& got = out[library];
    EXPECT_EQ(got["vocab_size"], 600);
    EXPECT_EQ(got["unk"], 0);
    EXPECT_EQ(got["bos"], tokenizer.bos_id());
    EXPECT_EQ(got["eos"], tokenizer.eos_id());
    ASSERT_EQ(got["encode"].size(), texts.size());
    for (size_t i = 0; i < texts.size(); ++i) {
      EXPECT_EQ(got["decode"][i], tokenizer.Decode(ids[i])) << "text " << i;
    }
  }
  EXPECT_FALSE(out["transformers"]["bos_added"]);
  for (size_t i = 0; i < texts.size(); ++i) EXPECT_EQ(tokenizer.Decode(ids[i]), Decoded(texts[i]));
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::string& text = texts[i];
    SCOPED_TRACE("text " + std::to_string(i) + ": '" + text + "'");
    EXPECT_EQ(out["sentencepiece"]["encode"][i], nlohmann::json(ids[i]));
    const std::vector<int64_t> theirs = out["transformers"]["encode"][i];
    if (text.rfind(' ', 0) == 0) {
      EXPECT_EQ(theirs, tokenizer.Encode(text.substr(1)));
    } else if (text.rfind("\xe2\x96\x81", 0) == 0) {
      EXPECT_EQ(theirs, tokenizer.Encode(text.substr(3)));
    } else if (text.find("</s>") != std::string::npos) {
      for (const int64_t id : ids[i]) EXPECT_GE(id, 3);  // conveyor: text, never a special id
      for (const int64_t special : {0, 1, 2}) {
        EXPECT_NE(std::find(theirs.begin(), theirs.end(), special), theirs.end()) << special;
      }
    } else {
      EXPECT_EQ(theirs, ids[i]);
    }
  }
}

// A unigram model encodes and decodes as the Python sentencepiece library does (transformers'
// Llama tokenizer takes bpe models only).
TEST_F(SentencePieceTest, TheSentencePieceLibraryEncodesAndDecodesAUnigramModelAsConveyorDoes) {
  CONVEYOR_SKIP_WITHOUT_REFERENCE_ENV();
  SentencePieceTrainOptions options;
  options.inputs = ProjectTextFiles();
  options.vocab_size = 500;
  options.model_type = "unigram";
  TrainSentencePiece(options, scratch_.Path("tokenizer.model"));
  const SentencePieceTokenizer tokenizer(scratch_.Path("tokenizer.model"));
  const std::vector<std::string> texts = LibraryTexts();
  std::vector<std::vector<int64_t>> ids;
  for (const std::string& text : texts) ids.push_back(tokenizer.Encode(text));
  const nlohmann::json out = RunLibraries(scratch_.path(), texts, ids, false);
  ASSERT_TRUE(out.contains("sentencepiece")) << out.dump();
  EXPECT_EQ(out["sentencepiece"]["vocab_size"], 500);
  for (size_t i = 0; i < texts.size(); ++i) {
    EXPECT_EQ(out["sentencepiece"]["encode"][i], nlohmann::json(ids[i])) << "text " << i;
    EXPECT_EQ(out["sentencepiece"]["decode"][i], tokenizer.Decode(ids[i])) << "text " << i;
    EXPECT_EQ(tokenizer.Decode(ids[i]), Decoded(texts[i])) << "text " << i;
  }
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
