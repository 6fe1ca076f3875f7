#include "conveyor/sim/mesh_network.h"

#include <gtest/gtest.h>

#include <string>

#include "conveyor/common/error.h"

namespace conveyor {
namespace {

MeshNetwork Nodes(int ranks_per_node) {
  MeshNetwork network;
  network.intra = Link{1, 100};
  network.inter = Link{3, 10};
  network.ranks_per_node = ranks_per_node;
  return network;
}

TEST(MeshNetworkTest, RanksFillNodesInOrder) {
  EXPECT_EQ(Nodes(4).node_of(3), 0);
  EXPECT_EQ(Nodes(4).node_of(4), 1);
  EXPECT_EQ(Nodes(0).node_of(1000), 0);  // one node
  EXPECT_EQ(Nodes(2).NodesOf({5, 0, 4, 1}), (std::vector<int>{0, 2}));
}

TEST(MeshNetworkTest, ARingIsAsSlowAsTheSlowestHopItMakes) {
  const MeshNetwork network = Nodes(2);
  EXPECT_EQ(network.SlowestLink({0, 1}), network.intra);
  EXPECT_EQ(network.SlowestLink({0, 2}), network.inter);
  EXPECT_EQ(network.SlowestLink({7}), network.intra);
  // 0 -> 1 within node 0, 1 -> 2 and 2 -> 0 across: both kinds, the worse of each number.
  MeshNetwork odd = network;
  odd.inter = Link{0.5, 10};  // a lower latency than the intra-node link's
  EXPECT_EQ(odd.SlowestLink({0, 1, 2}), (Link{1, 10}));
}

TEST(MeshNetworkTest, RingAllReduceFollowsTheFormula) {
  // 2 (n-1)/n * bytes / bandwidth + 2 (n-1) * latency.
  EXPECT_DOUBLE_EQ(RingAllReduceTime(4, 800, Link{0.5, 100}), 2 * 3.0 / 4 * 8 + 2 * 3 * 0.5);
  EXPECT_DOUBLE_EQ(RingAllReduceTime(1, 800, Link{0.5, 100}), 0);
  EXPECT_THROW(RingAllReduceTime(2, 800, Link{0.5, 0}), InternalError);
}

TEST(MeshNetworkTest, AllToAllFollowsTheFormulaOnItsOwnLinkWithinANode) {
  // (n-1)/n * bytes / bandwidth + latency: every pair's exchange at once.
  EXPECT_DOUBLE_EQ(AllToAllTime(4, 800, Link{0.5, 100}), 3.0 / 4 * 8 + 0.5);
  EXPECT_DOUBLE_EQ(AllToAllTime(1, 800, Link{0.5, 100}), 0);
  MeshNetwork network = Nodes(2);
  EXPECT_EQ(network.AllToAllLink({0, 1}), network.intra);  // unset: the intra link
  network.all_to_all_intra = Link{2, 50};
  EXPECT_EQ(network.AllToAllLink({0, 1}), (Link{2, 50}));
  EXPECT_EQ(network.AllToAllLink({1, 2}), network.inter);  // across nodes: the slowest link
}

TEST(MeshNetworkTest, NodesMustHoldTheMeshWhole) {
  const Mesh mesh = Mesh::Make(8, 2, 2, 2);
  EXPECT_NO_THROW(CheckFitsNodes(Nodes(4), mesh));
  EXPECT_NO_THROW(CheckFitsNodes(Nodes(0), mesh));
  try {
    CheckFitsNodes(Nodes(3), mesh);
    FAIL() << "3 ranks per node accepted for 8 ranks";
  } catch (const UserError& e) {
    EXPECT_EQ(std::string(e.what()),
              "3 ranks per node do not divide dp 2 x tp 2 x pp 2 (8 ranks, order tp-dp-pp) "
              "into whole nodes");
  }
  EXPECT_THROW(CheckFitsNodes(Nodes(-1), mesh), UserError);
}

}  // namespace
}  // namespace conveyor
