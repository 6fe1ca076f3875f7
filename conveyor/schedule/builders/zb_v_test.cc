#include "conveyor/schedule/builders/zb_v.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "conveyor/common/error.h"
#include "conveyor/schedule/activation_memory.h"
#include "conveyor/schedule/lower.h"
#include "conveyor/schedule/verify.h"

namespace conveyor {
namespace {

TEST(ZbVTest, SoundOnAVForEveryMicrobatchCount) {
  for (int p = 1; p <= 8; ++p) {
    for (int m = 1; m <= 3 * p + 1; ++m) {
      const Program program = BuildZbV(ScheduleOptions{p, m, 0});
      const std::string what = "zb-v p=" + std::to_string(p) + " m=" + std::to_string(m);
      EXPECT_EQ(program.layout.placement(), Placement::kV) << what;
      EXPECT_TRUE(Verify(program).empty()) << what << FormatFindings(Verify(program));
      EXPECT_NO_THROW(Lower(program)) << what;
      // 1F1B's memory: p micro-batches through a whole rank's share = 2p half-size stages.
      const auto peaks = PeakInFlight(program);
      EXPECT_LE(*std::max_element(peaks.begin(), peaks.end()), 2 * p) << what;
    }
  }
}

TEST(ZbVTest, WarmUpFillsTheVFirst) {
  // Rank 0 of p = 2: three forwards of stage 0 before the first forward of stage 3.
  const Program program = BuildZbV(ScheduleOptions{2, 4, 0});
  const auto& r0 = program.ranks[0];
  ASSERT_GE(r0.size(), 4u);
  EXPECT_EQ(r0[0].ToString(), "0F0");
  EXPECT_EQ(r0[2].ToString(), "0F2");
  EXPECT_EQ(r0[3].ToString(), "3F0");
  EXPECT_EQ(r0[4].ToString(), "3I0");
}

TEST(ZbVTest, OnlyTwoChunks) {
  EXPECT_NO_THROW(BuildZbV(ScheduleOptions{2, 4, 2}));
  try {
    BuildZbV(ScheduleOptions{2, 4, 3});
    FAIL();
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("chunks = 3"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace conveyor
