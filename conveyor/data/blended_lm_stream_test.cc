#include "conveyor/data/blended_lm_stream.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "conveyor/common/error.h"
#include "conveyor/common/scratch_folder_testing.h"
#include "conveyor/data/data_testing.h"

namespace conveyor {
namespace {

std::string WriteDataset(const std::string& prefix, int64_t documents, int64_t base) {
  WriteCountingDataSet(prefix, documents, base);
  return prefix;
}

IndexedLmStreamOptions Options(uint64_t seed) { return SmallStreamOptions(seed); }

std::vector<int64_t> Row(const at::Tensor& t, int64_t row) {
  const at::Tensor r = t[row].contiguous();
  return {r.data_ptr<int64_t>(), r.data_ptr<int64_t>() + r.numel()};
}

// A row's window: its inputs and the last target.
std::vector<int64_t> Window(const Batch& batch, int64_t row) {
  std::vector<int64_t> window = Row(batch.inputs, row);
  window.push_back(Row(batch.targets, row).back());
  return window;
}

class BlendedLmStreamTest : public ::testing::Test {
 protected:
  ScratchFolder scratch_;
  std::string a_ = WriteDataset(scratch_.Path("a"), 100, 0);
  std::string b_ = WriteDataset(scratch_.Path("b"), 60, 100);
};

TEST_F(BlendedLmStreamTest, ADataArgumentIsAPathOrWeightsAndPaths) {
  using Parts = std::vector<std::pair<double, std::string>>;
  EXPECT_EQ(ParseDataBlend("set"), (Parts{{1.0, "set"}}));
  EXPECT_EQ(ParseDataBlend("0.7 a  0.3 b"), (Parts{{0.7, "a"}, {0.3, "b"}}));
  EXPECT_EQ(ParseDataBlend("2 a 0 b"), (Parts{{2.0, "a"}, {0.0, "b"}}));
  for (const std::string bad :
       {"", "0.7 a 0.3", "-1 a 2 b", "x a 1 b", "0 a 0 b", "1 a 1 a", "inf a 1 b"}) {
    EXPECT_THROW(ParseDataBlend(bad), UserError) << bad;
  }
  // Each weight finite, their sum not: normalized, every weight would be 0 and the run would
  // evaluate nothing.
  try {
    ParseDataBlend("1e308 a 1e308 b");
    ADD_FAILURE() << "weights summing to infinity were taken";
  } catch (const UserError& e) {
    EXPECT_EQ(std::string(e.what()),
              "--data '1e308 a 1e308 b': the weights sum past the largest number (inf), so each "
              "would count as 0; give them on a smaller scale (0.7 A 0.3 B)");
  }
  EXPECT_EQ(ParseDataBlend("1e307 a 1e307 b"), (Parts{{1e307, "a"}, {1e307, "b"}}));
  EXPECT_TRUE(IsTokenData(a_));
  EXPECT_TRUE(IsTokenData("0.5 " + a_ + " 0.5 " + b_));
  EXPECT_FALSE(IsTokenData("fortunes"));
}

// One source: sample g is its sample g; a batch is N consecutive samples; a replica's rows are
// the rows of the whole batch, whatever the split of the rows.
TEST_F(BlendedLmStreamTest, OneSourceGivesItsSamplesAndAnyRowsOfABatch) {
  const BlendedLmStream stream(a_, Options(7));
  ASSERT_EQ(stream.sources().size(), 1u);
  const IndexedLmStream& source = stream.sources()[0];
  for (int64_t step = 0; step < 5; ++step) {
    const Batch batch = stream.Get(step);
    ASSERT_EQ(batch.inputs.sizes(), (c10::IntArrayRef{4, 8}));
    for (int64_t i = 0; i < 4; ++i) {
      EXPECT_EQ(stream.Locate(step * 4 + i), (std::pair<int, int64_t>{0, step * 4 + i}));
      EXPECT_EQ(Window(batch, i), source.TrainWindow(step * 4 + i).tokens);
    }
    for (const auto& [begin, end] : {std::pair{0, 2}, {2, 4}, {1, 2}, {3, 4}}) {
      const Batch rows = stream.GetRows(step, begin, end);
      ASSERT_EQ(rows.inputs.size(0), end - begin);
      EXPECT_TRUE(at::equal(rows.inputs, batch.inputs.narrow(0, begin, end - begin)));
      EXPECT_TRUE(at::equal(rows.targets, batch.targets.narrow(0, begin, end - begin)));
    }
  }
  EXPECT_THROW(stream.GetRows(0, 2, 5), UserError);
  EXPECT_THROW(stream.GetRows(-1, 0, 1), UserError);
}

// The sample order is fixed for a seed: these are the stream positions of the first samples
// for seed 1234 (a change here changes what every run and every resume trains on).
TEST_F(BlendedLmStreamTest, TheFirstSamplesOfASeedAreFixed) {
  const BlendedLmStream stream(a_, Options(1234));
  std::vector<int64_t> starts;
  for (int64_t g = 0; g < 8; ++g) starts.push_back(stream.sources()[0].TrainWindowStart(g));
  EXPECT_EQ(starts, (std::vector<int64_t>{344, 568, 336, 392, 384, 208, 512, 232}));
}

// Two sources 0.7 / 0.3: every period of 1000 samples holds 700 and 300 of them; each
// source's samples are taken in its own order, none skipped or repeated.
TEST_F(BlendedLmStreamTest, ABlendTakesEachSourcesSamplesInItsShareAndOrder) {
  const BlendedLmStream stream("0.7 " + a_ + " 0.3 " + b_, Options(3));
  ASSERT_EQ(stream.sources().size(), 2u);
  EXPECT_DOUBLE_EQ(stream.weights()[0], 0.7);
  std::vector<int64_t> next(2, 0);
  for (int64_t g = 0; g < 3 * kBlendPeriod; ++g) {
    const auto [source, sample] = stream.Locate(g);
    ASSERT_EQ(sample, next[source]) << "sample " << g;
    ++next[source];
    if (g == kBlendPeriod - 1) {
      EXPECT_EQ(next, (std::vector<int64_t>{700, 300}));
    }
  }
  // Spread through the period, not in runs: any 10 consecutive samples hold 7 of a.
  for (int64_t g = 0; g + 10 <= kBlendPeriod; g += 10) {
    int from_a = 0;
    for (int64_t k = g; k < g + 10; ++k) from_a += stream.Locate(k).first == 0;
    EXPECT_EQ(from_a, 7) << g;
  }
  const Batch batch = stream.Get(2);
  for (int64_t i = 0; i < 4; ++i) {
    const auto [source, sample] = stream.Locate(8 + i);
    EXPECT_EQ(Window(batch, i), stream.sources()[source].TrainWindow(sample).tokens);
  }
  // A weight of 0 takes nothing.
  const BlendedLmStream only_b("0 " + a_ + " 1 " + b_, Options(3));
  for (int64_t g = 0; g < 50; ++g) EXPECT_EQ(only_b.Locate(g).first, 1);
}

// Evaluation blends the validation windows by the same rule until one source runs out.
TEST_F(BlendedLmStreamTest, EvaluationBlendsTheValidationWindows) {
  const BlendedLmStream one(a_, Options(3));
  const int64_t windows = one.sources()[0].EvalWindows();
  ASSERT_EQ(one.EvalBatches(), (windows + 3) / 4);
  const Batch last = one.GetEval(one.EvalBatches() - 1);
  for (int64_t i = 0; i < 4; ++i) {
    const int64_t w = (one.EvalBatches() - 1) * 4 + i;
    if (w >= windows) {
      EXPECT_TRUE(last.targets[i].eq(-1).all().item<bool>());  // padding counts nothing
    } else {
      EXPECT_EQ(Window(last, i), one.sources()[0].EvalWindow(w).tokens);
    }
  }
  const BlendedLmStream blend("0.5 " + a_ + " 0.5 " + b_, Options(3));
  const int64_t shorter =
      std::min(blend.sources()[0].EvalWindows(), blend.sources()[1].EvalWindows());
  ASSERT_GT(shorter, 0);
  // Alternating, a first: the list ends when the shorter source has given its last window.
  EXPECT_GE(blend.EvalBatches() * 4, 2 * shorter);
  EXPECT_LE(blend.EvalBatches() * 4, 2 * shorter + 4);
  const Batch first = blend.GetEval(0);
  EXPECT_EQ(Window(first, 0), blend.sources()[0].EvalWindow(0).tokens);
  EXPECT_EQ(Window(first, 1), blend.sources()[1].EvalWindow(0).tokens);
  EXPECT_EQ(Window(first, 2), blend.sources()[0].EvalWindow(1).tokens);
}

}  // namespace
}  // namespace conveyor
