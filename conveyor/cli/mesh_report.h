// What `plan` says about a dp x tp x pp mesh: each rank's coordinates, pipeline stages and
// node, the groups of each axis, warnings about where the groups sit on the nodes, and the
// communication the mesh adds to a step (conveyor/sim/mesh_costs.h).
#ifndef CONVEYOR_CLI_MESH_REPORT_H_
#define CONVEYOR_CLI_MESH_REPORT_H_

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "conveyor/mesh/mesh.h"
#include "conveyor/schedule/layout.h"
#include "conveyor/sim/mesh_costs.h"
#include "conveyor/sim/mesh_network.h"

namespace conveyor {

// Pointers to what the caller owns; they must outlive the calls below.
struct MeshReport {
  const Mesh* mesh;
  const MeshNetwork* network;
  const Layout* layout;  // the pipeline's: rank k of it is the mesh's pp coordinate k
  const ModelShape* shape;
  const MeshSimResult* sim;
};

// Advice on the placement, each one sentence without a prefix.
struct MeshAdvice {
  // A TP group that spans nodes: "TP group {0,4} spans nodes 0 and 1: ...".
  std::vector<std::string> warnings;
  // The inverted layout: pipeline neighbours sharing a node while a TP group does not.
  std::vector<std::string> notes;
};
MeshAdvice AdviseMesh(const Mesh& mesh, const MeshNetwork& network);

// The mesh (one line per rank, the groups of each axis), "warning: " and "note: " lines,
// and when tp or dp is above 1 the links, the bytes each all-reduce moves, the time each
// adds, and the step with and without DP.
std::string MeshText(const MeshReport& report);

// Keys: order, dp, tp, pp, ranks_per_node, nodes, ranks (rank, dp, tp, pp, node, stages),
// groups (tp, dp, pp), warnings, notes, activation_bytes, stage_param_bytes, tp_time, dp_time,
// dp_buckets, step, step_without_dp, dp_comm, dp_exposed, dp_hidden_share.
nlohmann::json MeshJson(const MeshReport& report);

}  // namespace conveyor

#endif  // CONVEYOR_CLI_MESH_REPORT_H_
