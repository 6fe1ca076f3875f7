#include "conveyor/common/statistics.h"

#include <gtest/gtest.h>

namespace conveyor {
namespace {

TEST(StatisticsTest, MedianIsTheMiddleValueOrTheMeanOfTheMiddleTwo) {
  EXPECT_DOUBLE_EQ(Median({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(Median({4, 1, 3, 2}), 2.5);
  EXPECT_DOUBLE_EQ(Median({7}), 7);
}

}  // namespace
}  // namespace conveyor
