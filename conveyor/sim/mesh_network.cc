#include "conveyor/sim/mesh_network.h"

#include <algorithm>
#include <cmath>

#include "conveyor/common/error.h"

namespace conveyor {

Link LocalCpuLink() { return Link{kLocalHopSeconds, 0.7e9}; }

Link LocalGpuLink() { return Link{kLocalGpuHopSeconds, 300e9}; }

Link LocalGlooLink() { return Link{0.75e-3, 2e9}; }

Link MeshNetwork::AllToAllLink(const std::vector<int>& group) const {
  const bool one_node = NodesOf(group).size() <= 1;
  return one_node && all_to_all_intra.bandwidth > 0 ? all_to_all_intra : SlowestLink(group);
}

int MeshNetwork::node_of(int rank) const { return ranks_per_node > 0 ? rank / ranks_per_node : 0; }

std::vector<int> MeshNetwork::NodesOf(const std::vector<int>& group) const {
  std::vector<int> nodes;
  for (int rank : group) nodes.push_back(node_of(rank));
  std::sort(nodes.begin(), nodes.end());
  nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
  return nodes;
}

Link MeshNetwork::SlowestLink(const std::vector<int>& group) const {
  bool within = false, across = false;
  for (size_t k = 0; group.size() > 1 && k < group.size(); ++k) {
    const bool same = node_of(group[k]) == node_of(group[(k + 1) % group.size()]);
    within = within || same;
    across = across || !same;
  }
  if (!across) return intra;
  if (!within) return inter;
  return Link{std::max(intra.latency, inter.latency), std::min(intra.bandwidth, inter.bandwidth)};
}

void CheckFitsNodes(const MeshNetwork& network, const Mesh& mesh) {
  CONVEYOR_CHECK(network.ranks_per_node >= 0 &&
                 (network.ranks_per_node == 0 || mesh.size() % network.ranks_per_node == 0))
      << network.ranks_per_node << " ranks per node do not divide " << mesh.Describe()
      << " into whole nodes";
}

double RingAllReduceTime(int members, double bytes, const Link& link) {
  CONVEYOR_ASSERT(members >= 1 && std::isfinite(bytes) && bytes >= 0 &&
                  std::isfinite(link.latency) && link.latency >= 0 &&
                  std::isfinite(link.bandwidth) && link.bandwidth > 0)
      << "all-reduce of " << bytes << " bytes over " << members << " ranks on a link of latency "
      << link.latency << " s and bandwidth " << link.bandwidth << " B/s";
  const double n = members;
  return 2 * (n - 1) / n * bytes / link.bandwidth + 2 * (n - 1) * link.latency;
}

double AllToAllTime(int members, double bytes, const Link& link) {
  if (members == 1) return RingAllReduceTime(members, bytes, link);  // its checks; 0
  return RingAllReduceTime(members, bytes, Link{0, link.bandwidth}) / 2 + link.latency;
}

}  // namespace conveyor
