#include "conveyor/mesh/mesh.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "conveyor/common/error.h"

namespace conveyor {
namespace {

std::string ErrorOf(int world, int dp, int tp, int pp) {
  try {
    Mesh::Make(world, dp, tp, pp);
  } catch (const UserError& e) {
    return e.what();
  }
  return "accepted";
}

// The picture in mesh.h.
TEST(MeshTest, DefaultOrderPutsTpOnConsecutiveRanksThenDpThenPp) {
  const Mesh mesh = Mesh::Make(8, 2, 2, 2);
  EXPECT_EQ(mesh.coords(0), (MeshCoords{0, 0, 0}));
  EXPECT_EQ(mesh.coords(1), (MeshCoords{.dp = 0, .tp = 1, .pp = 0}));
  EXPECT_EQ(mesh.coords(2), (MeshCoords{.dp = 1, .tp = 0, .pp = 0}));
  EXPECT_EQ(mesh.coords(5), (MeshCoords{.dp = 0, .tp = 1, .pp = 1}));
  EXPECT_EQ(mesh.Groups(MeshAxis::kTp),
            (std::vector<std::vector<int>>{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(mesh.Groups(MeshAxis::kDp),
            (std::vector<std::vector<int>>{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(mesh.Groups(MeshAxis::kPp),
            (std::vector<std::vector<int>>{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(mesh.Describe(), "dp 2 x tp 2 x pp 2 (8 ranks, order tp-dp-pp)");
}

TEST(MeshTest, EveryOrderIsABijectionAndGroupsPartitionTheWorld) {
  for (const char* order :
       {"tp-dp-pp", "dp-tp-pp", "pp-tp-dp", "pp-dp-tp", "tp-pp-dp", "dp-pp-tp"}) {
    const Mesh mesh = Mesh::Make(24, 0, 2, 3, Mesh::ParseOrder(order));
    EXPECT_EQ(mesh.dp(), 4);
    EXPECT_EQ(Mesh::OrderName(mesh.order()), order);
    std::set<int> seen;
    for (int r = 0; r < mesh.size(); ++r) {
      const MeshCoords c = mesh.coords(r);
      EXPECT_EQ(mesh.rank_of(c), r) << order;
      seen.insert(c.dp * 100 + c.tp * 10 + c.pp);
    }
    EXPECT_EQ(seen.size(), 24u) << order;
    for (MeshAxis axis : {MeshAxis::kDp, MeshAxis::kTp, MeshAxis::kPp}) {
      std::set<int> covered;
      const auto groups = mesh.Groups(axis);
      EXPECT_EQ(static_cast<int>(groups.size()), mesh.size() / mesh.extent(axis));
      for (const auto& group : groups) {
        ASSERT_EQ(static_cast<int>(group.size()), mesh.extent(axis));
        for (int k = 0; k < static_cast<int>(group.size()); ++k) {
          EXPECT_EQ(mesh.coords(group[k]).at(axis), k) << order;  // position = coordinate
          EXPECT_EQ(mesh.GroupOf(axis, group[k]), group);
          EXPECT_TRUE(covered.insert(group[k]).second) << "rank in two groups";
        }
      }
      EXPECT_EQ(covered.size(), 24u);
    }
  }
  // Fastest axis first: pp-tp-dp puts pipeline neighbours on consecutive ranks.
  EXPECT_EQ(Mesh::Make(4, 1, 2, 2, Mesh::ParseOrder("pp-tp-dp")).GroupOf(MeshAxis::kPp, 0),
            (std::vector<int>{0, 1}));
}

TEST(MeshTest, RejectsSizesThatDoNotFillTheWorld) {
  EXPECT_EQ(ErrorOf(6, 0, 2, 2),
            "a world of 6 ranks does not divide into tp 2 x pp 2 (4 ranks per data-parallel "
            "replica)");
  EXPECT_EQ(ErrorOf(8, 3, 2, 2), "dp 3 x tp 2 x pp 2 = 12 ranks, the world has 8");
  EXPECT_NE(ErrorOf(8, 2, 0, 4).find("tp and pp must be at least 1"), std::string::npos);
  EXPECT_NE(ErrorOf(8, -1, 2, 4).find("got dp -1, tp 2, pp 4"), std::string::npos);
  EXPECT_EQ(ErrorOf(8, 0, 2, 4), "accepted");
}

TEST(MeshTest, ParseOrderNamesEachAxisOnce) {
  EXPECT_EQ(Mesh::ParseOrder("dp-pp-tp"),
            (Mesh::Order{MeshAxis::kDp, MeshAxis::kPp, MeshAxis::kTp}));
  for (const char* bad : {"", "tp-dp", "tp-dp-pp-dp", "tp-tp-pp", "tp,dp,pp", "TP-DP-PP"}) {
    try {
      Mesh::ParseOrder(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find("got '" + std::string(bad) + "'"), std::string::npos);
    }
  }
}

// A mesh of any named axes: an axis it lacks has extent 1, groups may span several axes
// (the first varying fastest), and the sizes must fill the world.
TEST(MeshTest, AnyNamedAxesMakeAMeshAndGroupsSpanSeveralAxes) {
  const Mesh mesh = Mesh::Make(
      16, {{MeshAxis::kTp, 2}, {MeshAxis::kCp, 2}, {MeshAxis::kDp, 2}, {MeshAxis::kPp, 2}});
  EXPECT_EQ(mesh.extent(MeshAxis::kCp), 2);
  EXPECT_EQ(mesh.extent(MeshAxis::kEp), 1);
  EXPECT_EQ(mesh.coords(6), (MeshCoords{.dp = 1, .tp = 0, .pp = 0, .ep = 0, .cp = 1}));
  EXPECT_EQ(mesh.rank_of(mesh.coords(13)), 13);
  EXPECT_EQ(mesh.Describe(), "dp 2 x tp 2 x pp 2 x cp 2 (16 ranks, order tp-cp-dp-pp)");
  // Data x context parallel: the ranks a gradient is summed over under context parallelism.
  EXPECT_EQ(mesh.GroupOf({MeshAxis::kDp, MeshAxis::kCp}, 1), (std::vector<int>{1, 5, 3, 7}));
  const auto groups = mesh.Groups({MeshAxis::kDp, MeshAxis::kCp});
  EXPECT_EQ(groups.size(), 4u);
  EXPECT_EQ(groups[0], (std::vector<int>{0, 4, 2, 6}));
  EXPECT_EQ(mesh.Groups({MeshAxis::kEp}).size(), 16u);  // extent 1: every rank alone
  try {
    Mesh::Make(8, {{MeshAxis::kTp, 2}, {MeshAxis::kEp, 2}});
    ADD_FAILURE() << "a mesh of 4 ranks for a world of 8";
  } catch (const UserError& e) {
    EXPECT_EQ(std::string(e.what()),
              "a mesh of tp 2 x ep 2 (each axis once, at least 1) for a world of 8 ranks: 4 ranks");
  }
  EXPECT_THROW(Mesh::Make(4, {{MeshAxis::kTp, 2}, {MeshAxis::kTp, 2}}), UserError);
  EXPECT_EQ(Mesh::ParseOrder("cp-tp", {MeshAxis::kTp, MeshAxis::kCp}),
            (Mesh::Order{MeshAxis::kCp, MeshAxis::kTp}));
}

// The expert layers' mesh folds expert parallelism over the dense mesh's data- and
// tensor-parallel ranks, on the same pipelines; a dense order that would give the experts
// other pipelines is refused, naming a rank and the fix.
TEST(MeshTest, ExpertsFoldOverTheDenseRanksOnTheSamePipelines) {
  const Mesh dense = Mesh::Make(16, 2, 4, 2);  // tp 4 x dp 2 per pipeline stage
  const Mesh experts = Mesh::FoldExperts(dense, /*ep=*/4, /*etp=*/2);
  EXPECT_EQ(experts.dp(), 1);  // 16 / (2 x 4 x 2)
  EXPECT_EQ(experts.Describe(), "dp 1 x tp 2 x pp 2 x ep 4 (16 ranks, order tp-ep-dp-pp)");
  EXPECT_EQ(experts.Groups(MeshAxis::kPp), dense.Groups(MeshAxis::kPp));
  // Expert-parallel groups span dense tensor- and data-parallel ranks of one stage.
  EXPECT_EQ(experts.GroupOf(MeshAxis::kEp, 0), (std::vector<int>{0, 2, 4, 6}));
  EXPECT_EQ(Mesh::FoldExperts(dense, 8).GroupOf(MeshAxis::kEp, 9),
            (std::vector<int>{8, 9, 10, 11, 12, 13, 14, 15}));
  for (int ep : {1, 2, 4, 8}) {
    const Mesh folded = Mesh::FoldExperts(dense, ep);
    EXPECT_EQ(folded.dp() * folded.extent(MeshAxis::kEp), 8) << "ep " << ep;
  }
  try {
    Mesh::FoldExperts(Mesh::Make(8, 2, 2, 2, Mesh::ParseOrder("tp-pp-dp")), 2);
    ADD_FAILURE() << "experts on other pipelines";
  } catch (const UserError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("must keep the dense layers' pipelines (dp 2 x tp 2 x pp 2 (8 ranks, "
                        "order tp-pp-dp)), but rank 0's pipeline is {0, 2} there and {0, 4} "
                        "here: put pp last in the mesh order"),
              std::string::npos)
        << what;
  }
  EXPECT_THROW(Mesh::FoldExperts(dense, 3), UserError);
}

}  // namespace
}  // namespace conveyor
