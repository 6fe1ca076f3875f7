#include "conveyor/train/data_parallel_reducer.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "conveyor/comm/local_transport.h"
#include "conveyor/comm/rank_threads.h"

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

// Forwards to a transport and records the elements each collective of the reducer left
// this rank holding summed: the whole operand of an all-reduce, the part of a
// reduce-scatter.
class RecordingTransport : public Transport {
 public:
  explicit RecordingTransport(Transport* inner) : inner_(inner) {}
  int rank() const override { return inner_->rank(); }
  int world_size() const override { return inner_->world_size(); }
  std::shared_ptr<Work> Send(at::Tensor tensor, int dst, std::uint32_t tag) override {
    return inner_->Send(tensor, dst, tag);
  }
  std::shared_ptr<Work> Recv(at::Tensor buffer, int src, std::uint32_t tag) override {
    return inner_->Recv(buffer, src, tag);
  }
  void AllReduceSum(std::vector<at::Tensor>& tensors) override {
    for (const at::Tensor& t : tensors) all_reduced += t.numel();
    inner_->AllReduceSum(tensors);
  }
  at::Tensor ReduceScatterSum(const at::Tensor& input,
                              const std::vector<int64_t>& counts) override {
    at::Tensor part = inner_->ReduceScatterSum(input, counts);
    scattered_in += input.numel();
    scattered_out += part.numel();
    return part;
  }
  std::vector<at::Tensor> AllGather(const at::Tensor& local) override {
    return inner_->AllGather(local);
  }
  at::Tensor AllToAll(const at::Tensor& input, const std::vector<int64_t>& send_counts,
                      const std::vector<int64_t>& recv_counts) override {
    return inner_->AllToAll(input, send_counts, recv_counts);
  }
  void Broadcast(at::Tensor& tensor, int root) override { inner_->Broadcast(tensor, root); }
  void Barrier() override { inner_->Barrier(); }
  std::unique_ptr<Transport> NewGroup(const std::vector<int>& ranks) override {
    return inner_->NewGroup(ranks);
  }
  void ReportFailure(const std::string& message) noexcept override {
    inner_->ReportFailure(message);
  }

  int64_t all_reduced = 0, scattered_in = 0, scattered_out = 0;

 private:
  Transport* inner_;
};

// ZeRO-1 on 3 ranks: "a" (16 elements, flat [0, 16)), "tied" (3, [16, 19), shared: kept
// whole) and "c" (10, [19, 29)); the replicas' ranges are [0, 10), [10, 20) and [20, 29).
// Rank r's gradients are r + 1: after Finish each rank holds the sum, 6, in its range of "a"
// and "c" and its own r + 1 elsewhere, "tied" summed whole, and it received only its range.
TEST(DataParallelReducerTest, ZeroReduceScattersEachReplicasRangeAndAllReducesSharedOnes) {
  auto world = LocalWorld(3);
  std::vector<DataParallelStats> stats(3);
  std::vector<int64_t> kept_elements(3);
  RunRankThreads(world, [&](int r) {
    NamedTensors params = {{"a", at::zeros({4, 4}).requires_grad_(true)},
                           {"tied", at::zeros({3}).requires_grad_(true)},
                           {"c", at::zeros({2, 5}).requires_grad_(true)}};
    for (auto& [name, p] : params) p.mutable_grad() = at::full_like(p, r + 1);
    auto layout = std::make_shared<const ShardLayout>(params, 3, r, std::set<std::string>{"tied"});
    RecordingTransport group(world[r].get());
    {
      DataParallelReducer reducer(&group, /*bucket_bytes=*/64, layout);
      reducer.Start({params[0]});
      reducer.Start({params[1], params[2]});
      stats[r] = reducer.Finish();
    }
    at::Tensor want = at::full({29}, r + 1.0);
    const auto [begin, end] = layout->range(r);
    want.narrow(0, begin, end - begin).fill_(6.0);
    want.narrow(0, 16, 3).fill_(6.0);  // tied
    int64_t offset = 0;
    for (const auto& [name, p] : params) {
      EXPECT_TRUE(p.grad().reshape({-1}).equal(want.narrow(0, offset, p.numel())))
          << "rank " << r << ", " << name << ": " << p.grad();
      offset += p.numel();
    }
    EXPECT_EQ(group.all_reduced, 3) << "only tied is all-reduced";
    EXPECT_EQ(group.scattered_in, 26);
    kept_elements[r] = group.scattered_out;
  });
  // Each replica received its range of the 26 scattered elements, about a third.
  EXPECT_EQ(kept_elements, (std::vector<int64_t>{10, 6 + 1, 9}));
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(stats[r].bytes, 29 * 4);
    EXPECT_EQ(stats[r].scattered_bytes, 26 * 4);
    EXPECT_EQ(stats[r].scattered_kept_bytes, kept_elements[r] * 4);
    EXPECT_EQ(stats[r].buckets, 3);  // a; tied; c (the kind changes at tied)
  }
}

TEST(DataParallelStatsTest, HiddenFractionIsTheShareNotWaitedFor) {
  EXPECT_DOUBLE_EQ((DataParallelStats{.comm_s = 4, .exposed_s = 1}).hidden_fraction(), 0.75);
  EXPECT_DOUBLE_EQ((DataParallelStats{.comm_s = 1, .exposed_s = 3}).hidden_fraction(), 0);
  EXPECT_DOUBLE_EQ(DataParallelStats{}.hidden_fraction(), 1);
}

}  // namespace
}  // namespace conveyor
