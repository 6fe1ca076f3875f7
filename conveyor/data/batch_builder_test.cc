#include "conveyor/data/batch_builder.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "conveyor/common/error.h"

namespace conveyor {
namespace {

TEST(BatchBuilderTest, UnsetRowsArePaddingWithOneRealPosition) {
  const Batch batch = BatchBuilder(3, 4, BatchBuilder::Targets::kPerToken).Build();
  EXPECT_TRUE(at::equal(batch.inputs, at::zeros({3, 4}, at::kLong)));
  EXPECT_TRUE(at::equal(batch.targets, at::full({3, 4}, -1, at::kLong)));
  EXPECT_EQ(batch.attention_mask.sum().item<int64_t>(), 3);
  EXPECT_TRUE(batch.attention_mask.select(1, 0).all().item<bool>());
  const Batch rows = BatchBuilder(3, 4, BatchBuilder::Targets::kPerRow).Build();
  EXPECT_EQ(rows.targets.sizes(), (std::vector<int64_t>{3}));
}

TEST(BatchBuilderTest, WindowShiftsTargetsByOne) {
  BatchBuilder builder(2, 3, BatchBuilder::Targets::kPerToken);
  builder.SetWindow(1,
                    "ab\xFF"
                    "d");
  const Batch batch = std::move(builder).Build();
  EXPECT_TRUE(at::equal(batch.inputs[1], at::tensor({97, 98, 255}, at::kLong)));
  EXPECT_TRUE(at::equal(batch.targets[1], at::tensor({98, 255, 100}, at::kLong)));
  EXPECT_TRUE(batch.attention_mask[1].all().item<bool>());
  EXPECT_EQ(batch.targets[0][0].item<int64_t>(), -1);  // row 0 untouched
}

TEST(BatchBuilderTest, ExampleTruncatesOrPads) {
  BatchBuilder builder(2, 4, BatchBuilder::Targets::kPerRow);
  builder.SetExample(0, "hi", 3);
  builder.SetExample(1, "toolong", 1);
  const Batch batch = std::move(builder).Build();
  EXPECT_TRUE(at::equal(batch.inputs[0], at::tensor({104, 105, 0, 0}, at::kLong)));
  EXPECT_TRUE(
      at::equal(batch.attention_mask[0], at::tensor({1, 1, 0, 0}, at::kLong).to(at::kBool)));
  EXPECT_TRUE(at::equal(batch.inputs[1], at::tensor({116, 111, 111, 108}, at::kLong)));
  EXPECT_TRUE(batch.attention_mask[1].all().item<bool>());
  EXPECT_TRUE(at::equal(batch.targets, at::tensor({3, 1}, at::kLong)));
}

TEST(BatchBuilderTest, ChecksOptions) {
  EXPECT_NO_THROW(CheckStreamOptions(1, 1, 0.0));
  EXPECT_THROW(CheckStreamOptions(0, 8, 0.1), UserError);
  EXPECT_THROW(CheckStreamOptions(4, 0, 0.1), UserError);
  EXPECT_THROW(CheckStreamOptions(4, 8, 1.0), UserError);
  EXPECT_THROW(CheckStreamOptions(4, 8, -0.5), UserError);
  EXPECT_THROW(BatchBuilder(4, 0, BatchBuilder::Targets::kPerRow), UserError);
}

}  // namespace
}  // namespace conveyor
