#include "conveyor/train/compute_placement.h"

#include <gtest/gtest.h>

#include "conveyor/schedule/registry.h"

namespace conveyor {
namespace {

RankPlacement On(double machine, int cores, int threads, MeshCoords coords) {
  return RankPlacement{machine, cores, threads, coords};
}

TEST(ComputePlacementTest, FourRanksOnTwoCoresShareOneDeviceWithRoomForTwo) {
  std::vector<RankPlacement> world;
  for (int pp = 0; pp < 4; ++pp) world.push_back(On(7, 2, 1, {0, 0, pp}));
  const ComputeSharing s = PipelineSharing(world, {0, 0, 0}, 4);
  EXPECT_EQ(s.device, (std::vector<int>{0, 0, 0, 0}));
  EXPECT_EQ(s.capacity, (std::vector<double>{2}));
  EXPECT_TRUE(s.Shares());
  EXPECT_EQ(s.Room(4), 2);
}

TEST(ComputePlacementTest, ReplicasOnTheMachineTakeTheirShareOfItsCores) {
  // dp 2 x pp 2 on 4 cores with 2 threads a rank: each pipeline rank stands for two ranks
  // of two threads, so the machine has room for one pipeline rank at full speed.
  std::vector<RankPlacement> world;
  for (int dp = 0; dp < 2; ++dp) {
    for (int pp = 0; pp < 2; ++pp) world.push_back(On(7, 4, 2, {dp, 0, pp}));
  }
  const ComputeSharing s = PipelineSharing(world, {1, 0, 0}, 2);
  EXPECT_EQ(s.device, (std::vector<int>{0, 0}));
  EXPECT_EQ(s.capacity, (std::vector<double>{1}));
}

TEST(ComputePlacementTest, RanksOnMachinesOfTheirOwnShareNothing) {
  const std::vector<RankPlacement> world = {On(1, 8, 8, {0, 0, 0}), On(2, 8, 8, {0, 0, 1})};
  const ComputeSharing s = PipelineSharing(world, {0, 0, 1}, 2);
  EXPECT_EQ(s.device, (std::vector<int>{0, 1}));
  EXPECT_EQ(s.capacity, (std::vector<double>{1, 1}));
  EXPECT_FALSE(s.Shares());
}

TEST(ComputePlacementTest, ThisRankKnowsItsMachineCoresAndThreads) {
  const RankPlacement p = ThisRankPlacement({0, 0, 3});
  EXPECT_GE(p.cores, 1);
  EXPECT_GE(p.threads, 1);
  EXPECT_EQ(p.coords.pp, 3);
  EXPECT_EQ(p.machine, ThisRankPlacement({}).machine);
  EXPECT_NE(p.machine, 0);
}

// Two ranks of a 1F1B pipeline: their spans go into their slots, and the work of rank 1's
// computes is what they held with rank 0 busy beside it on one core.
TEST(ComputePlacementTest, SlotsCarryEachRanksSpansAndWorkDeContendsThem) {
  const Program program = BuildSchedule("gpipe", ScheduleOptions{2, 1, 0});  // 0F0 0B0 | 1F0 1B0
  Timeline step0, step1;
  step0.spans = {Span{0, Action{Op::kForward, 0, 0}, 0, 1},
                 Span{0, Action{Op::kBackward, 0, 0}, 4, 6}};
  step1.spans = {Span{1, Action{Op::kForward, 1, 0}, 1, 2},
                 Span{1, Action{Op::kRecvF, 1, 0}, 0, 1, SpanKind::kWait},
                 Span{1, Action{Op::kBackward, 1, 0}, 2, 4}};
  std::vector<double> a = ComputeSlots(program, step0, 0);
  const std::vector<double> b = ComputeSlots(program, step1, 1);
  EXPECT_EQ(a, (std::vector<double>{0, 1, 4, 6, 0, 0, 0, 0}));
  for (size_t i = 0; i < a.size(); ++i) a[i] += b[i];
  // No two spans overlap: all work is the spans' own time.
  const ComputeSharing one_core = ComputeSharing::OneDevice(2, 1);
  EXPECT_EQ(ComputeWork(program, a, one_core, 1), (std::vector<double>{1, 2}));
  // Rank 0's backward moved onto rank 1's: [2, 4] shared by two on one core.
  a[2] = 2, a[3] = 4;
  EXPECT_EQ(ComputeWork(program, a, one_core, 1), (std::vector<double>{1, 1}));
  EXPECT_EQ(ComputeWork(program, a, one_core, 0), (std::vector<double>{1, 1}));
}

}  // namespace
}  // namespace conveyor
