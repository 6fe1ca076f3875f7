#include "conveyor/common/process_stats.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>

namespace conveyor {
namespace {

TEST(ProcessStatsTest, TheProcessStartedBeforeNowAndAfterBoot) {
  const double first = SecondsSinceProcessStart();
  EXPECT_GE(first, 0);
  EXPECT_LT(first, 24 * 3600.0);                         // a test process is not a day old
  EXPECT_GE(SecondsSinceProcessStart(), first - 0.011);  // it never goes back (one tick of 10 ms)
}

TEST(ProcessStatsTest, PeakResidentMemoryCountsWhatWasTouched) {
  const int64_t before = PeakResidentBytes();
  EXPECT_GT(before, 0);
  constexpr size_t kBytes = 256 << 20;
  std::unique_ptr<char[]> block(new char[kBytes]);
  std::memset(block.get(), 1, kBytes);  // resident only once written
  EXPECT_GE(PeakResidentBytes(), static_cast<int64_t>(kBytes)) << "before: " << before;
  EXPECT_GE(PeakResidentBytes(), before);
  EXPECT_EQ(block[kBytes - 1], 1);
}

TEST(ProcessStatsTest, TheAffinityMaskHoldsTheAvailableCores) {
  int bits = 0;
  for (uint64_t word : AffinityMask()) bits += __builtin_popcountll(word);
  EXPECT_EQ(bits, AvailableCores());
}

TEST(ProcessStatsTest, TheMachineIdIsStableAndExactInADouble) {
  const uint64_t id = MachineId();
  EXPECT_EQ(MachineId(), id);
  EXPECT_LT(id, uint64_t{1} << 52);
  EXPECT_EQ(static_cast<uint64_t>(static_cast<double>(id)), id);
}

}  // namespace
}  // namespace conveyor
