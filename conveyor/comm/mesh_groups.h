// The communication groups of a mesh (mesh/mesh.h): for each requested set of axes (one axis
// such as tp, or a combination such as dp x cp), every group along it, created on every rank
// in one order, so that the collective group creation matches on every backend (c10d's
// process groups, the in-process transport).
//
// A rank keeps the one group it belongs to for each set. A group of one rank is not created
// (Of returns null) unless the set is requested with `singles` (a pipeline of one stage still
// sends to itself through its transport); a group that is the whole world is the world
// itself, not a copy, unless requested with `own`.
//
// Not thread-safe; one per rank. `world` must outlive it and every group it hands out lives
// as long as it does.
#ifndef CONVEYOR_COMM_MESH_GROUPS_H_
#define CONVEYOR_COMM_MESH_GROUPS_H_

#include <map>
#include <memory>
#include <vector>

#include "conveyor/comm/transport.h"
#include "conveyor/mesh/mesh.h"

namespace conveyor {

class MeshGroups {
 public:
  struct Request {
    Mesh::Order axes;
    bool singles = false;  // create (and hand out) groups of one rank too
    // A group that is the whole world gets a transport of its own, not the world: for one
    // used from another thread beside the world's or other groups' users (a gradient
    // reduction during the backward).
    bool own = false;
  };

  // Collective over `world` (every rank of `mesh`, world_size() == mesh.size(); null for a
  // single rank, when every group is null): creates the groups of each request in the order
  // given, each request's groups in Mesh::Groups' order. The same axis set twice is an
  // internal error.
  MeshGroups(Transport* world, const Mesh& mesh, const std::vector<Request>& requests);

  // This rank's group along `axes`, ranked as Mesh::GroupOf orders them (a rank's position
  // in a one-axis group is its coordinate on the axis); null for a group of one rank not
  // requested with singles, or without a world. Precondition (asserted): `axes` was requested.
  Transport* Of(const Mesh::Order& axes) const;

 private:
  struct Entry {
    std::unique_ptr<Transport> owned;  // null when the group is the world or not created
    Transport* group = nullptr;
  };
  std::map<Mesh::Order, Entry> groups_;
};

}  // namespace conveyor

#endif  // CONVEYOR_COMM_MESH_GROUPS_H_
