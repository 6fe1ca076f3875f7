#include "conveyor/module/microbatch.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "conveyor/common/error.h"

namespace conveyor {
namespace {

Batch Sample(int n, int t) {
  Batch b;
  b.inputs = at::arange(n * t, at::kLong).view({n, t});
  b.targets = b.inputs.clone();
  b.targets[0][0] = -1;  // one uncounted target
  b.attention_mask = at::ones({n, t}, at::kBool);
  return b;
}

TEST(MicroBatchTest, UnevenSplitLargerFirst) {
  const auto mbs = SplitBatch(Sample(10, 3), 4);
  ASSERT_EQ(mbs.size(), 4u);
  std::vector<int64_t> sizes, firsts;
  for (const MicroBatch& mb : mbs) {
    sizes.push_back(mb.size());
    firsts.push_back(mb.first_sample);
    EXPECT_DOUBLE_EQ(mb.loss_denominator, 29);  // 30 targets, one not counted
    EXPECT_EQ(mb.attention_mask.size(0), mb.size());
  }
  EXPECT_EQ(sizes, (std::vector<int64_t>{3, 3, 2, 2}));
  EXPECT_EQ(firsts, (std::vector<int64_t>{0, 3, 6, 8}));
  EXPECT_EQ(mbs[2].inputs[0][0].item<int64_t>(), 6 * 3);
}

TEST(MicroBatchTest, RejectsBatchSmallerThanMicrobatches) {
  try {
    SplitBatch(Sample(3, 2), 4);
    FAIL();
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("batch of 3 samples cannot be split into 4"),
              std::string::npos)
        << e.what();
  }
  Batch bad = Sample(4, 2);
  bad.targets = bad.targets.narrow(0, 0, 3);
  EXPECT_THROW(SplitBatch(bad, 2), UserError);
}

// Data-parallel replicas: contiguous slices sized like micro-batches, whose micro-batches
// keep the whole batch's denominator, so that the replicas' summed losses are the batch's.
TEST(MicroBatchTest, SlicesShareTheBatchAndKeepItsDenominator) {
  const Batch batch = Sample(10, 3);
  std::vector<int64_t> sizes;
  int64_t next = 0;
  for (int d = 0; d < 3; ++d) {
    const Batch part = SliceBatch(batch, d, 3);
    sizes.push_back(part.inputs.size(0));
    EXPECT_EQ(part.inputs[0][0].item<int64_t>(), next * 3);
    EXPECT_EQ(part.targets.size(0), part.inputs.size(0));
    EXPECT_EQ(part.attention_mask.size(0), part.inputs.size(0));
    next += part.inputs.size(0);
    for (const MicroBatch& mb : SplitBatch(part, 2, CountTargets(batch.targets))) {
      EXPECT_DOUBLE_EQ(mb.loss_denominator, 29);
    }
  }
  EXPECT_EQ(sizes, (std::vector<int64_t>{4, 3, 3}));
  EXPECT_EQ(next, 10);
  EXPECT_DOUBLE_EQ(SplitBatch(SliceBatch(batch, 1, 3), 1)[0].loss_denominator, 9);
  try {
    SliceBatch(Sample(3, 2), 0, 4);
    FAIL();
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("3 samples cannot be shared by 4 data-parallel"),
              std::string::npos)
        << e.what();
  }
}

// A micro-batch's share is its counted targets over the batch's: the shares add up to 1,
// or to a replica's part of the global batch when the denominator is the global count.
TEST(MicroBatchTest, SharesWeighMicroBatchesByTheirCountedTargets) {
  Batch batch;
  batch.inputs = at::zeros({3, 4}, at::kLong);
  batch.targets = at::zeros({3, 4}, at::kLong);
  batch.targets[2].fill_(-1);  // the third sample counts nothing
  batch.targets[1][0] = -1;    // the second, 3 of its 4
  const std::vector<MicroBatch> mbs = SplitBatch(batch, 3);
  EXPECT_DOUBLE_EQ(mbs[0].share, 4.0 / 7);
  EXPECT_DOUBLE_EQ(mbs[1].share, 3.0 / 7);
  EXPECT_DOUBLE_EQ(mbs[2].share, 0);
  const std::vector<MicroBatch> replica = SplitBatch(batch, 1, 14);  // half the global count
  EXPECT_DOUBLE_EQ(replica[0].share, 0.5);
}

}  // namespace
}  // namespace conveyor
