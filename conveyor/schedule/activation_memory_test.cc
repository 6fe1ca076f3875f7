#include "conveyor/schedule/activation_memory.h"

#include <gtest/gtest.h>

#include <vector>

#include "conveyor/common/error.h"
#include "conveyor/schedule/program_testing.h"

namespace conveyor {
namespace {

TEST(PeakInFlightTest, CountsMicroBatchesFromForwardToBackward) {
  // GPipe on two ranks: both forwards before either backward.
  const Program gpipe = MakeProgram(Layout::Loop(2, 1, 2), {"0F0 0F1 0B0 0B1", "1F0 1F1 1B0 1B1"});
  EXPECT_EQ(PeakInFlight(gpipe), (std::vector<int>{2, 2}));
  // 1F1B order on one rank frees each activation before the next forward.
  const Program one_by_one = MakeProgram(Layout::Loop(1, 1, 2), {"0F0 0B0 0F1 0B1"});
  EXPECT_EQ(PeakInFlight(one_by_one), (std::vector<int>{1}));
}

TEST(PeakActivationsTest, PerStageSizes) {
  // One rank running stages 0 and 1.
  const Program full = MakeProgram(Layout::Loop(1, 2, 1), {"0F0 1F0 1B0 0B0"});
  EXPECT_EQ(PeakActivations(full, std::vector<double>{1, 3}, 1), std::vector<double>{4});
  // Split backward, W holding half: 2, 6, then I1 frees 2, I0 1, W0 1, W1 2.
  const Program split = MakeProgram(Layout::Loop(1, 2, 1), {"0F0 1F0 1I0 0I0 0W0 1W0"});
  EXPECT_EQ(PeakActivations(split, std::vector<double>{2, 4}, 0.5), std::vector<double>{6});
  EXPECT_EQ(PeakActivations(split, 1.0, 1.0), std::vector<double>{2});
  EXPECT_THROW(PeakActivations(split, std::vector<double>{1}, 1), UserError);
}

}  // namespace
}  // namespace conveyor
