// The network a device mesh runs on: ranks fill nodes in order, `ranks_per_node` to a node,
// and two kinds of link join them: one within a node (NVLink class) and one between nodes
// (InfiniBand class). Collectives are rings over a group in its order (Mesh::GroupOf); a
// ring is as slow as the slowest link it crosses.
//
// Units: seconds and bytes per second.
//
// Plain data and pure functions; safe to share across threads. Pure (no torch).
#ifndef CONVEYOR_SIM_MESH_NETWORK_H_
#define CONVEYOR_SIM_MESH_NETWORK_H_

#include <vector>

#include "conveyor/mesh/mesh.h"

namespace conveyor {

struct Link {
  double latency = 0;    // seconds per message (>= 0)
  double bandwidth = 0;  // bytes per second (> 0; there is no infinite link)

  bool operator==(const Link&) const = default;
};

// The pipeline hop between ranks sharing one CPU, over shared memory (20 to 40 us measured on
// 2 cores with 4 ranks busy; more while the cores are full).
inline constexpr double kLocalHopSeconds = 50e-6;
// The link of their collectives, rings of shared-memory messages (c10d_transport.h): a ring
// step costs a hop, and the data moves at about 0.7 GB a second (the copies into and out of
// the rings and the sums: two ranks' data-parallel all-reduce of 6.6 MB in two buckets took
// 12 to 15 ms, over Gloo too).
Link LocalCpuLink();

// Ranks as threads of one process sharing one GPU hand a tensor over inside the process (an
// event and a queue: a few tens of microseconds, estimated, not measured), and their
// collectives sum copies in the GPU's own memory (hundreds of GB a second; the estimate
// leaves the copies' share of the GPU out).
inline constexpr double kLocalGpuHopSeconds = 30e-6;
Link LocalGpuLink();
// The link of the collectives that ranks sharing one CPU run over Gloo rather than shared
// memory (the experts' all-to-all): a message wakes Gloo's threads on cores the ranks keep
// busy (1.4 to 2 ms a hop on this loaded 2-core host, c10d_transport.h), and the loopback
// moves a few GB a second. 0.75 ms an all-to-all: 80 of them made a step of 2 ranks at ep 2
// 85 ms longer than at ep 1 (bench/moe/run), the ranks computing at 0.73 of a lone one's
// speed, at which the simulator stretches the exchanges too.
Link LocalGlooLink();

struct MeshNetwork {
  // Defaults: within a node, NVLink-class (5 us, 150 GB/s of all-reduce bus bandwidth);
  // between nodes, one 200 Gb/s InfiniBand or RoCE port per GPU (10 us, 25 GB/s).
  Link intra{5e-6, 150e9};
  Link inter{1e-5, 25e9};
  int ranks_per_node = 0;  // 0: every rank on one node
  // Within a node, the all-to-all's link where it is not `intra` (ranks sharing one CPU:
  // LocalGlooLink, while their all-reduces take shared memory); bandwidth 0: `intra`.
  Link all_to_all_intra{0, 0};

  // The node of `rank`: rank / ranks_per_node (0 with ranks_per_node 0).
  int node_of(int rank) const;
  // The distinct nodes of `group`, ascending.
  std::vector<int> NodesOf(const std::vector<int>& group) const;
  // The link a ring over `group` (in that order, the last member sending to the first) is
  // limited by: the lowest bandwidth and the highest latency over the kinds of hop it
  // makes. A group of one rank makes none: the intra-node link.
  Link SlowestLink(const std::vector<int>& group) const;
  // The link an all-to-all over `group` is limited by: SlowestLink, or all_to_all_intra for
  // a group inside one node where that is set.
  Link AllToAllLink(const std::vector<int>& group) const;
};

// Throws UserError naming the numbers unless network.ranks_per_node is 0 or divides the
// mesh into whole nodes. (Links are the caller's to check: see RingAllReduceTime.)
void CheckFitsNodes(const MeshNetwork& network, const Mesh& mesh);

// Time of a ring all-reduce of `bytes` over `members` ranks on `link`:
// 2 (n-1)/n * bytes / bandwidth + 2 (n-1) * latency (0 for n = 1).
// REQUIRES (asserted): members >= 1, bytes >= 0, link.latency >= 0, link.bandwidth > 0,
// all finite.
double RingAllReduceTime(int members, double bytes, const Link& link);

// Time of an all-to-all over `members` ranks on `link` in which each rank holds `bytes` for
// all of them, its own share included (an even split): (n-1)/n * bytes / bandwidth + latency,
// every pair's exchange in flight at once (Gloo's and NCCL's all-to-all post them together;
// on this machine ep 4 took no longer a step than ep 2, bench/moe/run) (0 for n = 1).
// REQUIRES as RingAllReduceTime.
double AllToAllTime(int members, double bytes, const Link& link);

}  // namespace conveyor

#endif  // CONVEYOR_SIM_MESH_NETWORK_H_
