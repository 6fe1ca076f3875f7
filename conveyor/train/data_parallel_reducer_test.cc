#include "conveyor/train/data_parallel_reducer.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>

#include "conveyor/comm/local_transport.h"
#include "conveyor/comm/rank_threads_testing.h"

namespace conveyor {
namespace {

// Three parameters on each of 3 ranks, rank r's gradients filled with r + 1 (one left
// undefined on rank 0): after Finish every rank holds the sums, 1 + 2 + 3 = 6.
TEST(DataParallelReducerTest, SumsEveryGradientInBuckets) {
  auto world = LocalWorld(3);
  std::vector<DataParallelStats> stats(3);
  RunRankThreads(world, [&](int r) {
    NamedTensors params = {{"a", at::zeros({4, 4}).requires_grad_(true)},
                           {"b", at::zeros({3}).requires_grad_(true)},
                           {"c", at::zeros({2, 5}).requires_grad_(true)}};
    for (auto& [name, p] : params) {
      if (!(r == 0 && name == "b")) p.mutable_grad() = at::full_like(p, r + 1);
    }
    DataParallelReducer reducer(world[r].get(), /*bucket_bytes=*/64);
    reducer.Start({params[0]});  // as two stages would, one after the other
    reducer.Start({params[1], params[2]});
    stats[r] = reducer.Finish();
    const double want_b = 2 + 3;  // rank 0 gave zeros
    EXPECT_TRUE(at::allclose(params[0].second.grad(), at::full({4, 4}, 6.0)));
    EXPECT_TRUE(at::allclose(params[1].second.grad(), at::full({3}, want_b)));
    EXPECT_TRUE(at::allclose(params[2].second.grad(), at::full({2, 5}, 6.0)));
  });
  for (const DataParallelStats& s : stats) {
    EXPECT_EQ(s.bytes, (16 + 3 + 10) * 4);
    EXPECT_EQ(s.buckets, 2);  // a: 64 bytes, a bucket of its own; b and c: the second
    EXPECT_GE(s.comm_s, 0);
    EXPECT_GE(s.hidden_fraction(), 0);
    EXPECT_LE(s.hidden_fraction(), 1);
  }
}

TEST(DataParallelReducerTest, FinishResetsAndAFailureReachesTheCaller) {
  auto world = LocalWorld(2);
  RunRankThreads(world, [&](int r) {
    DataParallelReducer reducer(world[r].get(), 1 << 20);
    NamedTensors params = {{"w", at::ones({2}).requires_grad_(true)}};
    params[0].second.mutable_grad() = at::ones({2});
    reducer.Start(params);
    EXPECT_EQ(reducer.Finish().buckets, 1);
    EXPECT_EQ(reducer.Finish().buckets, 0);  // nothing started since
    // Rank 1 fails instead of reducing: rank 0's reduction must throw, not hang, and so
    // must every later one.
    if (r == 1) {
      world[1]->ReportFailure("disk on fire");
      return;
    }
    for (int attempt = 0; attempt < 2; ++attempt) {
      reducer.Start(params);
      try {
        reducer.Finish();
        ADD_FAILURE() << "a failed reduction returned";
      } catch (const CommError& e) {
        EXPECT_NE(std::string(e.what()).find("disk on fire"), std::string::npos) << e.what();
      }
    }
  });
}

TEST(DataParallelStatsTest, HiddenFractionIsTheShareNotWaitedFor) {
  EXPECT_DOUBLE_EQ((DataParallelStats{.comm_s = 4, .exposed_s = 1}).hidden_fraction(), 0.75);
  EXPECT_DOUBLE_EQ((DataParallelStats{.comm_s = 1, .exposed_s = 3}).hidden_fraction(), 0);
  EXPECT_DOUBLE_EQ(DataParallelStats{}.hidden_fraction(), 1);
}

}  // namespace
}  // namespace conveyor
