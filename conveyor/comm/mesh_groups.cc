#include "conveyor/comm/mesh_groups.h"

#include <utility>

#include "conveyor/common/error.h"

namespace conveyor {

MeshGroups::MeshGroups(Transport* world, const Mesh& mesh, const std::vector<Request>& requests) {
  CONVEYOR_ASSERT(world == nullptr || world->world_size() == mesh.size())
      << "a world of " << world->world_size() << " ranks for a mesh of " << mesh.size();
  for (const Request& request : requests) {
    CONVEYOR_ASSERT(!groups_.contains(request.axes))
        << "the groups along " << Mesh::OrderName(request.axes) << " requested twice";
    Entry& entry = groups_[request.axes];
    if (world == nullptr) continue;
    const std::vector<std::vector<int>> groups = mesh.Groups(request.axes);
    const int size = static_cast<int>(groups.front().size());
    if (size == 1 && !request.singles) continue;
    if (size == mesh.size() && !request.own) {
      entry.group = world;
    } else {
      for (const std::vector<int>& ranks : groups) {
        std::unique_ptr<Transport> group = world->NewGroup(ranks);
        if (group != nullptr) entry.owned = std::move(group);
      }
      entry.group = entry.owned.get();
    }
  }
}

Transport* MeshGroups::Of(const Mesh::Order& axes) const {
  const auto it = groups_.find(axes);
  CONVEYOR_ASSERT(it != groups_.end())
      << "no groups along " << Mesh::OrderName(axes) << " were created";
  return it->second.group;
}

}  // namespace conveyor
