#include "conveyor/data/token_windows.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <vector>

#include "conveyor/common/error.h"

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
