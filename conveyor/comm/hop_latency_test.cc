#include "conveyor/comm/hop_latency.h"

#include <gtest/gtest.h>

#include <vector>

#include "conveyor/comm/local_transport.h"
#include "conveyor/comm/rank_threads.h"
#include "conveyor/common/error.h"

namespace conveyor {
namespace {

// Every rank of a 3-thread world gets the same positive number.
TEST(HopLatencyTest, EveryRankAgreesOnAPositiveTime) {
  auto world = LocalWorld(3, TransportOptions{std::chrono::seconds(30)});
  std::vector<double> seen(3, -1);
  RunRankThreads(world, [&](int r) { seen[r] = MeasureHopLatency(*world[r], 4096, 5); });
  EXPECT_GT(seen[0], 0);
  EXPECT_EQ(seen[0], seen[1]);
  EXPECT_EQ(seen[0], seen[2]);
}

TEST(HopLatencyTest, OneRankHasNoHopsAndBadArgumentsAreRefused) {
  auto world = LocalWorld(1, TransportOptions{});
  EXPECT_EQ(MeasureHopLatency(*world[0], 4096, 3), 0);
  EXPECT_THROW(MeasureHopLatency(*world[0], 2, 3), UserError);
  EXPECT_THROW(MeasureHopLatency(*world[0], 4096, 0), UserError);
}

}  // namespace
}  // namespace conveyor
