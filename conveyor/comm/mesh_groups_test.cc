#include "conveyor/comm/mesh_groups.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <numeric>

#include "conveyor/comm/local_transport.h"
#include "conveyor/comm/rank_threads.h"
#include "conveyor/common/error.h"

namespace conveyor {
namespace {

constexpr std::chrono::milliseconds kTimeout{30000};

// The sum of `value` over `group`.
int64_t SumOver(Transport* group, int64_t value) {
  std::vector<at::Tensor> t = {at::full({1}, value, at::kLong)};
  group->AllReduceSum(t);
  return t[0].item<int64_t>();
}

// The sum of the world ranks of Mesh::GroupOf(axes, rank).
int64_t RankSum(const Mesh& mesh, const Mesh::Order& axes, int rank) {
  const std::vector<int> ranks = mesh.GroupOf(axes, rank);
  return std::accumulate(ranks.begin(), ranks.end(), int64_t{0});
}

TEST(MeshGroupsTest, EachRankGetsItsGroupAlongOneAxisOrSeveral) {
  const Mesh mesh = Mesh::Make(8, 2, 2, 2);  // dp 2 x tp 2 x pp 2, tp-dp-pp
  const std::vector<Mesh::Order> sets = {{MeshAxis::kTp},
                                         {MeshAxis::kDp},
                                         {MeshAxis::kTp, MeshAxis::kDp},
                                         {MeshAxis::kPp},
                                         {MeshAxis::kDp, MeshAxis::kPp}};
  std::vector<MeshGroups::Request> requests;
  for (const Mesh::Order& axes : sets) requests.push_back({axes});
  std::vector<std::unique_ptr<Transport>> world = LocalWorld(8, TransportOptions{kTimeout});
  std::atomic<int> checked{0};
  RunRankThreads(world, [&](int r) {
    const MeshGroups groups(world[r].get(), mesh, requests);
    for (const Mesh::Order& axes : sets) {
      Transport* group = groups.Of(axes);
      ASSERT_NE(group, nullptr) << Mesh::OrderName(axes);
      const std::vector<int> ranks = mesh.GroupOf(axes, r);
      EXPECT_EQ(group->world_size(), static_cast<int>(ranks.size())) << Mesh::OrderName(axes);
      EXPECT_EQ(ranks[group->rank()], r) << Mesh::OrderName(axes);
      // The collective runs over exactly the mesh's group.
      EXPECT_EQ(SumOver(group, r), RankSum(mesh, axes, r)) << Mesh::OrderName(axes);
    }
    // A rank's position in a one-axis group is its coordinate on the axis.
    EXPECT_EQ(groups.Of({MeshAxis::kTp})->rank(), mesh.coords(r).tp);
    EXPECT_EQ(groups.Of({MeshAxis::kDp})->rank(), mesh.coords(r).dp);
    ++checked;
  });
  EXPECT_EQ(checked.load(), 8);
}

TEST(MeshGroupsTest, SingleRankGroupsOnlyWhenAskedAndTheWholeWorldIsTheWorld) {
  const Mesh mesh = Mesh::Make(4, 2, 1, 2);  // dp 2 x tp 1 x pp 2
  std::vector<std::unique_ptr<Transport>> world = LocalWorld(4, TransportOptions{kTimeout});
  std::atomic<int> checked{0};
  RunRankThreads(world, [&](int r) {
    const MeshGroups groups(
        world[r].get(), mesh,
        {{{MeshAxis::kTp}}, {{MeshAxis::kEp}, /*singles=*/true}, {{MeshAxis::kDp, MeshAxis::kPp}}});
    EXPECT_EQ(groups.Of({MeshAxis::kTp}), nullptr);
    Transport* alone = groups.Of({MeshAxis::kEp});  // an axis the mesh lacks: extent 1
    ASSERT_NE(alone, nullptr);
    EXPECT_EQ(alone->world_size(), 1);
    EXPECT_EQ(groups.Of({MeshAxis::kDp, MeshAxis::kPp}), world[r].get());
    ++checked;
  });
  EXPECT_EQ(checked.load(), 4);
}

TEST(MeshGroupsTest, WithoutAWorldEveryGroupIsNullAndUnrequestedAxesAreRefused) {
  const Mesh mesh = Mesh::Make(1, 1, 1, 1);
  const MeshGroups groups(nullptr, mesh, {{{MeshAxis::kTp}}, {{MeshAxis::kPp}, true}});
  EXPECT_EQ(groups.Of({MeshAxis::kPp}), nullptr);
  EXPECT_THROW(groups.Of({MeshAxis::kDp}), InternalError);
}

}  // namespace
}  // namespace conveyor
