#include "conveyor/data/lm_stream.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <string>

#include "conveyor/common/error.h"
#include "conveyor/data/data_testing.h"

namespace conveyor {
namespace {

// 40 documents "<doc NN> ..." of about 60 bytes, each unique, in two categories.
Corpus Numbered() {
  std::vector<std::pair<std::string, std::string>> docs;
  for (int i = 0; i < 40; ++i) {
    char marker[16];
    std::snprintf(marker, sizeof(marker), "<doc %02d>", i);
    docs.push_back({i % 2 ? "odd" : "even",
                    std::string(marker) + " the quick brown fox jumps over the lazy dog"});
  }
  return CorpusOf(docs);
}

LmStreamOptions Options(int64_t t, int64_t n, double held_out = 0.2, uint64_t seed = 1) {
  LmStreamOptions options;
  options.seq_len = t;
  options.batch_size = n;
  options.held_out_fraction = held_out;
  options.seed = seed;
  return options;
}

bool Equal(const Batch& a, const Batch& b) {
  return at::equal(a.inputs, b.inputs) && at::equal(a.targets, b.targets) &&
         at::equal(a.attention_mask, b.attention_mask);
}

std::string RowBytes(const at::Tensor& row) {
  std::string bytes;
  for (int64_t i = 0; i < row.size(0); ++i)
    bytes.push_back(static_cast<char>(row[i].item<int64_t>()));
  return bytes;
}

TEST(LmStreamTest, ShapesDtypesAndShiftedTargets) {
  const LmStream stream(Numbered(), Options(16, 5));
  const Batch batch = stream.Get(3);
  EXPECT_EQ(batch.inputs.sizes(), (std::vector<int64_t>{5, 16}));
  EXPECT_EQ(batch.targets.sizes(), (std::vector<int64_t>{5, 16}));
  EXPECT_EQ(batch.attention_mask.sizes(), (std::vector<int64_t>{5, 16}));
  EXPECT_EQ(batch.inputs.scalar_type(), at::kLong);
  EXPECT_EQ(batch.targets.scalar_type(), at::kLong);
  EXPECT_EQ(batch.attention_mask.scalar_type(), at::kBool);
  EXPECT_TRUE(batch.attention_mask.all().item<bool>());
  EXPECT_TRUE(at::equal(batch.inputs.slice(1, 1), batch.targets.slice(1, 0, 15)));
  for (int64_t i = 0; i < 5; ++i) {
    // Every row is a real window of the train text.
    const std::string window = RowBytes(batch.inputs[i]) + RowBytes(batch.targets[i]).back();
    EXPECT_NE(stream.train_text().find(window), std::string::npos) << window;
  }
}

TEST(LmStreamTest, SameStepSameBatchWhateverHappenedBefore) {
  const Corpus corpus = Numbered();
  const LmStream a(corpus, Options(16, 4));
  const LmStream b(corpus, Options(16, 4));
  const Batch first = a.Get(7);
  at::manual_seed(123);  // global torch RNG state must not matter
  (void)at::rand({10});
  for (int step = 0; step < 5; ++step) (void)a.Get(step);
  (void)a.GetEval(0);
  EXPECT_TRUE(Equal(first, a.Get(7)));
  EXPECT_TRUE(Equal(first, b.Get(7)));  // a fresh stream, as after a resume
  EXPECT_FALSE(Equal(first, a.Get(8)));
  EXPECT_FALSE(Equal(first, LmStream(corpus, Options(16, 4, 0.2, 2)).Get(7)));
}

TEST(LmStreamTest, SampleDependsOnlyOnSeedStepAndIndex) {
  // Row i of a batch of 8 equals row i of a batch of 3: a pipeline configuration that
  // changes the batch size changes nothing else.
  const Corpus corpus = Numbered();
  const Batch small = LmStream(corpus, Options(16, 3)).Get(5);
  const Batch large = LmStream(corpus, Options(16, 8)).Get(5);
  EXPECT_TRUE(at::equal(small.inputs, large.inputs.slice(0, 0, 3)));
}

TEST(LmStreamTest, HeldOutDocumentsAreDisjointFromTrain) {
  const Corpus corpus = Numbered();
  const LmStream stream(corpus, Options(16, 4, 0.19));
  int held = 0;
  for (const Document& d : corpus.documents) {
    const bool in_train = stream.train_text().find(d.text) != std::string::npos;
    const bool in_held_out = stream.held_out_text().find(d.text) != std::string::npos;
    EXPECT_NE(in_train, in_held_out) << d.text;
    held += in_held_out;
  }
  EXPECT_EQ(held, 8);  // the first 8 of 40 equal documents reach 19%
  EXPECT_NE(stream.train_text().find("dog\n%\n<doc"), std::string::npos);  // separator
  const LmStream no_eval(corpus, Options(16, 4, 0.0));
  EXPECT_TRUE(no_eval.held_out_text().empty());
  EXPECT_EQ(no_eval.EvalBatches(), 0);
}

TEST(LmStreamTest, LongSingleDocumentIsSplitIntoPieces) {
  std::string text;  // digits and spaces only, so every '%' comes from a separator
  for (int i = 0; text.size() < 20 * LmStream::kPieceBytes; ++i) text += std::to_string(i) + " ";
  const LmStream stream(CorpusOf({{"book", text}}), Options(32, 2, 0.1));
  const std::string& train = stream.train_text();
  const std::string& held = stream.held_out_text();
  EXPECT_GE(held.size(), 0.1 * text.size());
  EXPECT_LT(held.size(), 0.1 * text.size() + LmStream::kPieceBytes + 64);
  EXPECT_GT(stream.EvalBatches(), 0);
  const int64_t separators =
      std::count(train.begin(), train.end(), '%') + std::count(held.begin(), held.end(), '%');
  EXPECT_GT(separators, 0);
  EXPECT_EQ(train.size() + held.size(), text.size() + 3 * separators);  // no byte lost
}

TEST(LmStreamTest, EvalTilesHeldOutTextAndPadsTheLastBatch) {
  const LmStream stream(Numbered(), Options(10, 4, 0.2));
  const std::string& held = stream.held_out_text();
  const int64_t windows = (static_cast<int64_t>(held.size()) - 1) / 10;
  ASSERT_EQ(stream.EvalBatches(), (windows + 3) / 4);
  std::string tiled;
  int64_t padding_rows = 0;
  for (int64_t b = 0; b < stream.EvalBatches(); ++b) {
    const Batch batch = stream.GetEval(b);
    EXPECT_TRUE(Equal(batch, stream.GetEval(b)));
    for (int64_t i = 0; i < 4; ++i) {
      if (batch.targets[i][0].item<int64_t>() < 0) {
        ++padding_rows;
        EXPECT_EQ(batch.attention_mask[i].sum().item<int64_t>(), 1);  // position 0 only
        EXPECT_TRUE((batch.targets[i] == -1).all().item<bool>());
        EXPECT_TRUE((batch.inputs[i] == 0).all().item<bool>());
        continue;
      }
      tiled += RowBytes(batch.inputs[i]);
    }
  }
  EXPECT_EQ(padding_rows, stream.EvalBatches() * 4 - windows);
  EXPECT_EQ(tiled, held.substr(0, windows * 10));
  EXPECT_THROW(stream.GetEval(stream.EvalBatches()), UserError);
  EXPECT_THROW(stream.GetEval(-1), UserError);
}

TEST(LmStreamTest, RejectsBadOptions) {
  const Corpus corpus = Numbered();
  EXPECT_THROW(LmStream(corpus, Options(0, 4)), UserError);
  EXPECT_THROW(LmStream(corpus, Options(16, 0)), UserError);
  EXPECT_THROW(LmStream(corpus, Options(16, 4, 1.0)), UserError);
  EXPECT_THROW(LmStream(corpus, Options(16, 4, -0.1)), UserError);
  EXPECT_THROW(LmStream(corpus, Options(16, 4)).Get(-1), UserError);
  try {
    LmStream(CorpusOf({{"tiny", "short text"}}), Options(16, 4));
    FAIL() << "a 10-byte corpus accepted for seq_len 16";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("fewer than seq_len + 1 = 17"), std::string::npos)
        << e.what();
  }
}

TEST(LmStreamTest, RealFortunes) {
  if (!FortunesInstalled()) {
    GTEST_SKIP() << kFortunesDir << " is absent: install the Debian package `fortunes`";
  }
  const Corpus corpus = LoadFortunes();
  const LmStream stream(corpus, LmStreamOptions{});
  const double total =
      static_cast<double>(stream.train_text().size() + stream.held_out_text().size());
  std::cout << "lm stream: " << stream.train_text().size() << " train bytes, "
            << stream.held_out_text().size() << " held-out bytes, " << stream.EvalBatches()
            << " eval batches\n";
  EXPECT_NEAR(stream.held_out_text().size() / total, 0.05, 0.01);
  const Batch batch = stream.Get(0);
  EXPECT_EQ(batch.inputs.sizes(), (std::vector<int64_t>{8, 128}));
  EXPECT_GE(batch.inputs.min().item<int64_t>(), 0);
  EXPECT_LT(batch.inputs.max().item<int64_t>(), 256);
}

}  // namespace
}  // namespace conveyor
