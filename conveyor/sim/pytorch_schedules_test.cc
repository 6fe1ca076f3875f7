// PyTorch's reference schedules (testdata/pytorch-schedules) simulate to the
// makespans ANCHORS.md states for uniform costs: F = I = W = 1, B = 2, OVERLAP_F_B = F + B.
#include <gtest/gtest.h>

#include "conveyor/schedule/program_csv.h"
#include "conveyor/sim/simulator.h"

namespace conveyor {
namespace {

double UniformMakespan(const std::string& name) {
  const std::string path = std::string(CONVEYOR_TESTDATA_DIR) + "/pytorch-schedules/" + name;
  CostModel costs;
  costs.uniform = StageCost{1, 1, 1};
  return Simulate(LoadProgramCsv(path).program, costs).makespan;
}

TEST(PytorchScheduleSimTest, DualPipeVReachesTheOneStepBound) {
  // 3 * v * m + (p - 1) = 3 * 2 * 10 + 3.
  EXPECT_DOUBLE_EQ(UniformMakespan("dualpipev_4rank_10mb.csv"), 63);
}

TEST(PytorchScheduleSimTest, InterleavedZeroBubbleReachesTheOneStepBound) {
  // 3 * 2 * 8 + 1, with and without comms.
  EXPECT_DOUBLE_EQ(UniformMakespan("zb1p_2rank_2stagep_compute.csv"), 49);
  EXPECT_DOUBLE_EQ(UniformMakespan("zb1p_2rank_2stagep_comms.csv"), 49);
}

}  // namespace
}  // namespace conveyor
