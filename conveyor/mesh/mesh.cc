#include "conveyor/mesh/mesh.h"

#include <algorithm>

#include "conveyor/common/error.h"

namespace conveyor {
namespace {

constexpr std::array<MeshAxis, 3> kAxes = {MeshAxis::kDp, MeshAxis::kTp, MeshAxis::kPp};

int& Coordinate(MeshCoords& c, MeshAxis axis) {
  switch (axis) {
    case MeshAxis::kDp:
      return c.dp;
    case MeshAxis::kTp:
      return c.tp;
    case MeshAxis::kPp:
      break;
  }
  return c.pp;
}

}  // namespace

std::string_view MeshAxisName(MeshAxis axis) {
  switch (axis) {
    case MeshAxis::kDp:
      return "dp";
    case MeshAxis::kTp:
      return "tp";
    case MeshAxis::kPp:
      break;
  }
  return "pp";
}

int MeshCoords::at(MeshAxis axis) const {
  return axis == MeshAxis::kDp ? dp : axis == MeshAxis::kTp ? tp : pp;
}

Mesh::Order Mesh::ParseOrder(std::string_view text) {
  Order order{};
  size_t start = 0;
  int n = 0;
  bool ok = true;
  while (ok && start <= text.size()) {
    const size_t end = std::min(text.find('-', start), text.size());
    const std::string_view name = text.substr(start, end - start);
    const auto axis = std::find_if(kAxes.begin(), kAxes.end(),
                                   [&](MeshAxis a) { return MeshAxisName(a) == name; });
    ok = axis != kAxes.end() && n < 3 &&
         std::find(order.begin(), order.begin() + n, *axis) == order.begin() + n;
    if (ok) order[n++] = *axis;
    start = end + 1;
  }
  CONVEYOR_CHECK(ok && n == 3)
      << "the mesh order must name tp, dp and pp once each, joined by '-' (fastest-varying "
         "first, e.g. tp-dp-pp), got '"
      << text << "'";
  return order;
}

std::string Mesh::OrderName(const Order& order) {
  std::string name;
  for (MeshAxis axis : order) name += (name.empty() ? "" : "-") + std::string(MeshAxisName(axis));
  return name;
}

Mesh Mesh::Make(int world, int dp, int tp, int pp, const Order& order) {
  CONVEYOR_CHECK(world >= 1) << "the world must have at least 1 rank, got " << world;
  CONVEYOR_CHECK(tp >= 1 && pp >= 1 && dp >= 0)
      << "tp and pp must be at least 1 and dp at least 1 (0 = world / (tp * pp)), got dp " << dp
      << ", tp " << tp << ", pp " << pp;
  if (dp == 0) {
    CONVEYOR_CHECK(world % (tp * pp) == 0)
        << "a world of " << world << " ranks does not divide into tp " << tp << " x pp " << pp
        << " (" << tp * pp << " ranks per data-parallel replica)";
    dp = world / (tp * pp);
  }
  CONVEYOR_CHECK(static_cast<long long>(dp) * tp * pp == world)
      << "dp " << dp << " x tp " << tp << " x pp " << pp << " = "
      << static_cast<long long>(dp) * tp * pp << " ranks, the world has " << world;
  return Mesh(dp, tp, pp, order);
}

int Mesh::extent(MeshAxis axis) const {
  return axis == MeshAxis::kDp ? dp_ : axis == MeshAxis::kTp ? tp_ : pp_;
}

MeshCoords Mesh::coords(int rank) const {
  CONVEYOR_ASSERT(rank >= 0 && rank < size()) << "rank " << rank << " outside " << Describe();
  MeshCoords c;
  for (MeshAxis axis : order_) {
    Coordinate(c, axis) = rank % extent(axis);
    rank /= extent(axis);
  }
  return c;
}

int Mesh::rank_of(const MeshCoords& coords) const {
  int rank = 0;
  for (auto axis = order_.rbegin(); axis != order_.rend(); ++axis) {
    const int x = coords.at(*axis);
    CONVEYOR_ASSERT(x >= 0 && x < extent(*axis))
        << MeshAxisName(*axis) << " " << x << " outside " << Describe();
    rank = rank * extent(*axis) + x;
  }
  return rank;
}

std::vector<int> Mesh::GroupOf(MeshAxis axis, int rank) const {
  MeshCoords c = coords(rank);
  std::vector<int> group;
  for (int x = 0; x < extent(axis); ++x) {
    Coordinate(c, axis) = x;
    group.push_back(rank_of(c));
  }
  return group;
}

std::vector<std::vector<int>> Mesh::Groups(MeshAxis axis) const {
  std::vector<std::vector<int>> groups;
  for (int rank = 0; rank < size(); ++rank) {
    if (coords(rank).at(axis) == 0) groups.push_back(GroupOf(axis, rank));
  }
  return groups;  // by their lowest rank: each group's first member is its lowest rank
}

std::string Mesh::Describe() const {
  return "dp " + std::to_string(dp_) + " x tp " + std::to_string(tp_) + " x pp " +
         std::to_string(pp_) + " (" + std::to_string(size()) + " ranks, order " +
         OrderName(order_) + ")";
}

}  // namespace conveyor
