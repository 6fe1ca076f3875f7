#include "conveyor/train/pipeline_step_report.h"

#include <gtest/gtest.h>

#include <vector>

#include "conveyor/comm/local_transport.h"
#include "conveyor/comm/rank_threads.h"

namespace conveyor {
namespace {

// Three ranks, each posting one of three sends and running one of three computes: the report
// sums the posts and the compute times, takes the earliest start and the latest end, and
// adds the losses; every rank gets the same report.
TEST(PipelineStepReportTest, SumsPostsSpansTheRanksAndAddsLossesAndAuxiliaryLosses) {
  auto world = LocalWorld(3);
  std::vector<PipelineStepReport> got(3);
  RunRankThreads(world, [&](int r) {
    RankStepReport mine;
    mine.send_posts = {0, 0, 0};
    mine.send_posts[r] = 10.0 + r;
    mine.computes = std::vector<double>(6, 0.0);
    mine.computes[2 * r] = r;
    mine.computes[2 * r + 1] = r + 0.5;
    mine.start = 1.0 + r;
    mine.end = 5.0 - r;
    mine.loss = r == 2 ? 0.75 : 0.0;
    mine.auxiliary = {0.5 * r, r == 1 ? 0.25 : 0.0};  // each name from any stage, summed
    got[r] = GatherStepReports(world[r].get(), mine);
  });
  for (const PipelineStepReport& report : got) {
    EXPECT_EQ(report.send_posts, (std::vector<double>{10, 11, 12}));
    EXPECT_EQ(report.computes, (std::vector<double>{0, 0.5, 1, 1.5, 2, 2.5}));
    EXPECT_EQ(report.first_start, 1.0);
    EXPECT_EQ(report.last_end, 5.0);
    EXPECT_EQ(report.loss, 0.75);
    EXPECT_EQ(report.auxiliary, (std::vector<double>{1.5, 0.25}));
  }
}

TEST(PipelineStepReportTest, ALoneRankReportsItself) {
  const PipelineStepReport report =
      GatherStepReports(nullptr, RankStepReport{{2.5}, {1, 2}, 1, 3, 0.5, {0.125}});
  EXPECT_EQ(report.send_posts, std::vector<double>{2.5});
  EXPECT_EQ(report.computes, (std::vector<double>{1, 2}));
  EXPECT_EQ(report.first_start, 1);
  EXPECT_EQ(report.last_end, 3);
  EXPECT_EQ(report.loss, 0.5);
  EXPECT_EQ(report.auxiliary, std::vector<double>{0.125});
}

}  // namespace
}  // namespace conveyor
