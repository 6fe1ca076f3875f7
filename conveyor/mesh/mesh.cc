#include "conveyor/mesh/mesh.h"

#include <algorithm>

#include "conveyor/common/error.h"

namespace conveyor {
namespace {

constexpr MeshAxis kAxes[] = {MeshAxis::kDp, MeshAxis::kTp, MeshAxis::kPp, MeshAxis::kEp,
                              MeshAxis::kCp};

// "tp, dp and pp".
std::string ListOf(const Mesh::Order& axes) {
  std::string text;
  for (size_t i = 0; i < axes.size(); ++i) {
    text += (i == 0                 ? ""
             : i + 1 == axes.size() ? " and "
                                    : ", ") +
            std::string(MeshAxisName(axes[i]));
  }
  return text;
}

}  // namespace

std::string_view MeshAxisName(MeshAxis axis) {
  switch (axis) {
    case MeshAxis::kDp:
      return "dp";
    case MeshAxis::kTp:
      return "tp";
    case MeshAxis::kPp:
      return "pp";
    case MeshAxis::kEp:
      return "ep";
    case MeshAxis::kCp:
      break;
  }
  return "cp";
}

int MeshCoords::at(MeshAxis axis) const { return const_cast<MeshCoords&>(*this).at(axis); }

int& MeshCoords::at(MeshAxis axis) {
  switch (axis) {
    case MeshAxis::kDp:
      return dp;
    case MeshAxis::kTp:
      return tp;
    case MeshAxis::kPp:
      return pp;
    case MeshAxis::kEp:
      return ep;
    case MeshAxis::kCp:
      break;
  }
  return cp;
}

Mesh::Order Mesh::ParseOrder(std::string_view text, const Order& axes) {
  Order order;
  size_t start = 0;
  bool ok = true;
  while (ok && start <= text.size()) {
    const size_t end = std::min(text.find('-', start), text.size());
    const std::string_view name = text.substr(start, end - start);
    const auto axis =
        std::find_if(axes.begin(), axes.end(), [&](MeshAxis a) { return MeshAxisName(a) == name; });
    ok = axis != axes.end() && std::find(order.begin(), order.end(), *axis) == order.end();
    if (ok) order.push_back(*axis);
    start = end + 1;
  }
  CONVEYOR_CHECK(ok && order.size() == axes.size())
      << "the mesh order must name " << ListOf(axes)
      << " once each, joined by '-' (fastest-varying first, e.g. " << OrderName(axes) << "), got '"
      << text << "'";
  return order;
}

std::string Mesh::OrderName(const Order& order) {
  std::string name;
  for (MeshAxis axis : order) name += (name.empty() ? "" : "-") + std::string(MeshAxisName(axis));
  return name;
}

Mesh::Mesh(std::vector<Extent> axes) : axes_(std::move(axes)) {
  for (const auto& [axis, extent] : axes_) {
    order_.push_back(axis);
    size_ *= extent;
  }
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
  CONVEYOR_ASSERT(
      std::is_permutation(order.begin(), order.end(), kDefaultOrder.begin(), kDefaultOrder.end()))
      << "the dense mesh's order " << OrderName(order) << " must name dp, tp and pp once each";
  MeshCoords extents{.dp = dp, .tp = tp, .pp = pp};
  std::vector<Extent> axes;
  for (MeshAxis axis : order) axes.emplace_back(axis, extents.at(axis));
  return Mesh(std::move(axes));
}

Mesh Mesh::Make(int world, const std::vector<Extent>& axes) {
  long long product = 1;
  std::string sizes;
  Order order;
  bool ok = true;
  for (const auto& [axis, extent] : axes) {
    ok = ok && extent >= 1 && std::find(order.begin(), order.end(), axis) == order.end();
    order.push_back(axis);
    product *= std::max(extent, 1);
    sizes += (sizes.empty() ? "" : " x ") + std::string(MeshAxisName(axis)) + " " +
             std::to_string(extent);
  }
  CONVEYOR_CHECK(ok && product == world)
      << "a mesh of " << sizes << " (each axis once, at least 1) for a world of " << world
      << " ranks: " << (ok ? std::to_string(product) + " ranks" : "an axis twice or below 1");
  return Mesh(axes);
}

Mesh Mesh::FoldExperts(const Mesh& dense, int ep, int etp) {
  const int world = dense.size(), pp = dense.pp();
  CONVEYOR_CHECK(ep >= 1 && etp >= 1 && world % (static_cast<long long>(ep) * etp * pp) == 0)
      << "expert parallelism: etp " << etp << " x ep " << ep << " x pp " << pp
      << " must divide the world of " << world << " ranks (each the experts' data-parallel "
      << "replicas' share)";
  const Mesh expert = Make(world, {{MeshAxis::kTp, etp},
                                   {MeshAxis::kEp, ep},
                                   {MeshAxis::kDp, world / (ep * etp * pp)},
                                   {MeshAxis::kPp, pp}});
  for (int rank = 0; rank < world; ++rank) {
    const std::vector<int> mine = expert.GroupOf(MeshAxis::kPp, rank);
    const std::vector<int> theirs = dense.GroupOf(MeshAxis::kPp, rank);
    if (mine == theirs) continue;
    auto list = [](const std::vector<int>& ranks) {
      std::string text;
      for (int r : ranks) text += (text.empty() ? "" : ", ") + std::to_string(r);
      return "{" + text + "}";
    };
    CONVEYOR_CHECK(false) << "the expert layers' layout (etp " << etp << " x ep " << ep << " x edp "
                          << expert.dp() << " x pp " << pp
                          << ", order tp-ep-dp-pp) must keep the dense layers' pipelines ("
                          << dense.Describe() << "), but rank " << rank << "'s pipeline is "
                          << list(theirs) << " there and " << list(mine)
                          << " here: put pp last in the mesh order";
  }
  return expert;
}

int Mesh::extent(MeshAxis axis) const {
  for (const auto& [a, extent] : axes_) {
    if (a == axis) return extent;
  }
  return 1;
}

MeshCoords Mesh::coords(int rank) const {
  CONVEYOR_ASSERT(rank >= 0 && rank < size()) << "rank " << rank << " outside " << Describe();
  MeshCoords c;
  for (const auto& [axis, extent] : axes_) {
    c.at(axis) = rank % extent;
    rank /= extent;
  }
  return c;
}

int Mesh::rank_of(const MeshCoords& coords) const {
  int rank = 0;
  for (auto it = axes_.rbegin(); it != axes_.rend(); ++it) {
    const auto& [axis, extent] = *it;
    const int x = coords.at(axis);
    CONVEYOR_ASSERT(x >= 0 && x < extent)
        << MeshAxisName(axis) << " " << x << " outside " << Describe();
    rank = rank * extent + x;
  }
  return rank;
}

std::vector<int> Mesh::GroupOf(const Order& axes, int rank) const {
  MeshCoords c = coords(rank);
  int members = 1;
  for (MeshAxis axis : axes) members *= extent(axis);
  std::vector<int> group;
  for (int k = 0; k < members; ++k) {
    int rest = k;
    for (MeshAxis axis : axes) {
      c.at(axis) = rest % extent(axis);
      rest /= extent(axis);
    }
    group.push_back(rank_of(c));
  }
  return group;
}

std::vector<std::vector<int>> Mesh::Groups(const Order& axes) const {
  std::vector<std::vector<int>> groups;
  for (int rank = 0; rank < size(); ++rank) {
    const MeshCoords c = coords(rank);
    if (std::all_of(axes.begin(), axes.end(), [&](MeshAxis a) { return c.at(a) == 0; })) {
      groups.push_back(GroupOf(axes, rank));
    }
  }
  return groups;  // by their lowest rank: each group's first member is its lowest rank
}

std::string Mesh::Describe() const {
  std::string text;
  for (MeshAxis axis : kAxes) {
    if (std::find(order_.begin(), order_.end(), axis) == order_.end()) continue;
    text += (text.empty() ? "" : " x ") + std::string(MeshAxisName(axis)) + " " +
            std::to_string(extent(axis));
  }
  return text + " (" + std::to_string(size()) + " ranks, order " + OrderName(order_) + ")";
}

}  // namespace conveyor
