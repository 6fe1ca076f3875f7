// Command-line flags of `plan` for the 3D mesh: its sizes and order, the nodes and links it
// runs on, and the model sizes its communication depends on (conveyor/sim/mesh_costs.h).
#ifndef CONVEYOR_CLI_MESH_FLAGS_H_
#define CONVEYOR_CLI_MESH_FLAGS_H_

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "conveyor/mesh/mesh.h"
#include "conveyor/sim/mesh_costs.h"
#include "conveyor/sim/mesh_network.h"

namespace conveyor {

// The most ranks a planned mesh may have (dp x tp x pp).
inline constexpr int64_t kMaxMeshRanks = int64_t{1} << 20;

// Numbers as 64 bits where a flag gives an integer: a value too large for an int is refused
// by name, not wrapped. The defaults of `network` and `shape` are the flags' defaults.
struct MeshFlags {
  int64_t dp = 1;
  int64_t tp = 1;
  int64_t gpus_per_node = 0;  // 0: every rank on one node
  std::string order = Mesh::OrderName(Mesh::kDefaultOrder);
  MeshNetwork network;  // ranks_per_node comes from gpus_per_node
  ModelShape shape;

  void Register(CLI::App& app);
  // Whether there is more to the mesh than the pipeline: dp or tp above 1, or nodes given.
  bool shown() const;
  // The mesh of dp x tp x `pp` ranks in `order`. UserError naming the flag and value when a
  // size is out of range ([1, 4096] each, kMaxMeshRanks in all) or the order is not one.
  Mesh ToMesh(int pp) const;
  // The network for `mesh`. UserError naming the flag and value when a latency is negative,
  // a bandwidth not positive (or either not finite or above kMaxCostFlag), or
  // --gpus-per-node does not divide the mesh into whole nodes.
  MeshNetwork ToNetwork(const Mesh& mesh) const;
  // The model sizes. UserError naming the flag and value when one is out of its range.
  ModelShape ToShape() const;
};

}  // namespace conveyor

#endif  // CONVEYOR_CLI_MESH_FLAGS_H_
