#include "conveyor/data/token_windows.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <vector>

#include "conveyor/common/error.h"
#include "conveyor/common/scratch_folder_testing.h"
#include "conveyor/data/data_testing.h"
#include "conveyor/data/indexed_dataset.h"

namespace conveyor {
namespace {

// Every token but the first is a target exactly once, right after its input, in order; the
// last window is shorter and padded.
TEST(TokenWindowsTest, EveryTokenButTheFirstIsPredictedOnce) {
  for (int64_t n : {2, 3, 9, 10, 11, 25}) {
    const at::Tensor tokens = at::arange(100, 100 + n, at::kLong);
    const std::vector<Batch> batches = NextTokenWindows(tokens, 4, 2);
    std::vector<int64_t> targets;
    int64_t windows = 0;
    for (const Batch& b : batches) {
      ASSERT_EQ(b.inputs.size(1), 4);
      ASSERT_LE(b.inputs.size(0), 2);
      for (int64_t i = 0; i < b.inputs.size(0); ++i, ++windows) {
        for (int64_t j = 0; j < 4; ++j) {
          const int64_t target = b.targets[i][j].item<int64_t>();
          if (target < 0) {
            EXPECT_EQ(b.inputs[i][j].item<int64_t>(), 0) << "padding";
            continue;
          }
          EXPECT_EQ(b.inputs[i][j].item<int64_t>(), 100 + windows * 4 + j) << "n " << n;
          EXPECT_EQ(target, b.inputs[i][j].item<int64_t>() + 1) << "n " << n;
          targets.push_back(target);
        }
      }
    }
    EXPECT_EQ(windows, (n - 1 + 3) / 4) << "n " << n;
    ASSERT_EQ(static_cast<int64_t>(targets.size()), n - 1) << "n " << n;
    for (int64_t k = 0; k < n - 1; ++k) EXPECT_EQ(targets[k], 101 + k);
  }
}

// A loss mask leaves the targets it marks 0 at -1; document masks number each window's tokens
// by document, restarting at each window and each document (documents of 5 + j % 7 tokens).
TEST(TokenWindowsTest, MasksMarkTargetsAndDocumentPositions) {
  ScratchFolder scratch;
  WriteCountingDataSet(scratch.Path("set"), 4);  // 5, 6, 7, 8 tokens
  const IndexedDataset data(scratch.Path("set"));
  const at::Tensor tokens = DataSetStream(data, 256);
  StreamMasks masks;
  masks.targets = at::arange(26, at::kLong).remainder(2);  // odd positions are targets
  masks.documents = &data;
  const std::vector<Batch> batches = NextTokenWindows(tokens, 10, 2, masks);
  ASSERT_EQ(batches.size(), 2u);  // windows at 0, 10, 20 (the last of 5 targets)
  for (int64_t w = 0; w < 3; ++w) {
    const Batch& b = batches[w / 2];
    const int64_t row = w % 2;
    for (int64_t j = 0; j < 10 && w * 10 + j + 1 < 26; ++j) {
      const int64_t next = w * 10 + j + 1;
      EXPECT_EQ(b.targets[row][j].item<int64_t>(),
                next % 2 == 1 ? tokens[next].item<int64_t>() : -1);
    }
  }
  // Documents start at 0, 5, 11, 18: window 0 is 0..4 then 0..4; window 1 (tokens 10-19)
  // 0, then 0..6, then 0, 1.
  const std::vector<int64_t> first(batches[0].positions[0].data_ptr<int64_t>(),
                                   batches[0].positions[0].data_ptr<int64_t>() + 10);
  EXPECT_EQ(first, (std::vector<int64_t>{0, 1, 2, 3, 4, 0, 1, 2, 3, 4}));
  const std::vector<int64_t> second(batches[0].positions[1].data_ptr<int64_t>(),
                                    batches[0].positions[1].data_ptr<int64_t>() + 10);
  EXPECT_EQ(second, (std::vector<int64_t>{0, 0, 1, 2, 3, 4, 5, 6, 0, 1}));
  EXPECT_FALSE(NextTokenWindows(tokens, 10, 2)[0].positions.defined());
}

TEST(TokenWindowsTest, RefusesAStreamTooShortOrEmptyWindows) {
  EXPECT_THROW(NextTokenWindows(at::ones({1}, at::kLong), 4, 2), UserError);
  EXPECT_THROW(NextTokenWindows(at::ones({5}, at::kLong), 0, 2), UserError);
  EXPECT_THROW(NextTokenWindows(at::ones({5}, at::kLong), 4, 0), UserError);
}

TEST(TokenWindowsTest, ACorpusIsItsDocumentsBetweenNewlines) {
  Corpus corpus;
  corpus.categories = {"a"};
  corpus.documents = {{0, "ab"}, {0, "c"}};
  const at::Tensor stream = CorpusByteStream(corpus);
  EXPECT_TRUE(at::equal(stream, at::tensor({'a', 'b', '\n', 'c'}, at::kLong))) << stream;
}

}  // namespace
}  // namespace conveyor
