#include "conveyor/comm/group_ranks.h"

#include <algorithm>
#include <numeric>
#include <set>
#include <sstream>
#include <utility>

#include "conveyor/common/error.h"

namespace conveyor {
namespace {

std::string Join(const std::vector<int>& values) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < values.size(); ++i) out << (i ? ", " : "") << values[i];
  out << "]";
  return out.str();
}

}  // namespace

GroupRanks::GroupRanks(std::vector<int> world_ranks, int rank, int my_world_rank, bool is_world)
    : world_ranks_(std::move(world_ranks)),
      rank_(rank),
      my_world_rank_(my_world_rank),
      is_world_(is_world) {}

GroupRanks GroupRanks::World(int world_size, int rank) {
  CONVEYOR_CHECK(world_size >= 1 && rank >= 0 && rank < world_size)
      << "rank " << rank << " is outside a world of size " << world_size;
  std::vector<int> ranks(world_size);
  std::iota(ranks.begin(), ranks.end(), 0);
  return GroupRanks(std::move(ranks), rank, rank, /*is_world=*/true);
}

GroupRanks GroupRanks::Subgroup(const std::vector<int>& ranks) const {
  CONVEYOR_CHECK(!ranks.empty()) << Self() << ": a new group needs at least one rank";
  std::set<int> seen;
  std::vector<int> world_ranks;
  int my_position = -1;
  for (size_t i = 0; i < ranks.size(); ++i) {
    int r = ranks[i];
    CONVEYOR_CHECK(r >= 0 && r < size()) << Self() << ": group " << Join(ranks) << " names rank "
                                         << r << ", outside a group of size " << size();
    CONVEYOR_CHECK(seen.insert(r).second)
        << Self() << ": group " << Join(ranks) << " names rank " << r << " twice";
    world_ranks.push_back(world_ranks_[r]);
    if (r == rank_) my_position = static_cast<int>(i);
  }
  return GroupRanks(std::move(world_ranks), my_position, my_world_rank_, /*is_world=*/false);
}

std::string GroupRanks::Self() const {
  std::ostringstream out;
  out << "rank " << my_world_rank_;
  if (!is_world_ && member())
    out << " (rank " << rank_ << " of group " << Join(world_ranks_) << ")";
  return out.str();
}

std::string GroupRanks::Describe(const char* op, const char* direction, int peer,
                                 std::uint32_t tag) const {
  std::ostringstream out;
  out << Self() << ": " << op << " " << direction << " rank " << world_rank(peer) << " (tag " << tag
      << ")";
  return out.str();
}

void GroupRanks::CheckPeer(const char* op, int peer, std::uint32_t tag) const {
  CONVEYOR_CHECK(peer >= 0 && peer < size() && peer != rank_)
      << Self() << ": " << op << " with peer " << peer << ": the peer must be another rank in [0, "
      << size() << ")";
  CONVEYOR_CHECK(tag <= kMaxTag) << Self() << ": " << op << " with rank " << world_rank(peer)
                                 << ": tag " << tag << " is above the largest tag " << kMaxTag;
}

void GroupRanks::CheckRoot(const char* op, int root) const {
  CONVEYOR_CHECK(root >= 0 && root < size())
      << Self() << ": " << op << " from root " << root << ": the root must be a rank in [0, "
      << size() << ")";
}

}  // namespace conveyor
