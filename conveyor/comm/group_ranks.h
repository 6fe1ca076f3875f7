// GroupRanks: the ranks of one communication group in terms of the world, for the
// implementations of Transport: argument checks shared by every backend, and the names that
// error messages use (always world ranks, so a message means the same on every rank).
//
// Value type; immutable; thread-safe.
#ifndef CONVEYOR_COMM_GROUP_RANKS_H_
#define CONVEYOR_COMM_GROUP_RANKS_H_

#include <cstdint>
#include <string>
#include <vector>

namespace conveyor {

class GroupRanks {
 public:
  // The largest tag every backend accepts (Gloo's tags are ints).
  static constexpr std::uint32_t kMaxTag = 0x7fffffff;

  // The whole world of `world_size` ranks, seen from `rank`.
  static GroupRanks World(int world_size, int rank);

  // The sub-group made of `ranks` (ranks of this group). Throws UserError (naming this rank)
  // unless they are non-empty, distinct and in [0, size()). member() is false when this rank
  // is not among them.
  GroupRanks Subgroup(const std::vector<int>& ranks) const;

  bool member() const { return rank_ >= 0; }
  int rank() const { return rank_; }  // -1 for a non-member
  int size() const { return static_cast<int>(world_ranks_.size()); }
  int world_rank(int group_rank) const { return world_ranks_.at(group_rank); }
  int my_world_rank() const { return my_world_rank_; }

  // "rank 3", or "rank 3 (rank 1 of group [1, 3])" inside a sub-group.
  std::string Self() const;

  // "rank 3: recv from rank 1 (tag 7)"; `peer` is a group rank.
  std::string Describe(const char* op, const char* direction, int peer, std::uint32_t tag) const;

  // Throws UserError unless `peer` is another rank of this group and `tag` is a valid tag.
  void CheckPeer(const char* op, int peer, std::uint32_t tag) const;

  // Throws UserError unless `root` (of a collective `op`) is a rank of this group.
  void CheckRoot(const char* op, int root) const;

 private:
  GroupRanks(std::vector<int> world_ranks, int rank, int my_world_rank, bool is_world);

  std::vector<int> world_ranks_;  // group rank -> world rank
  int rank_;
  int my_world_rank_;
  bool is_world_;
};

}  // namespace conveyor

#endif  // CONVEYOR_COMM_GROUP_RANKS_H_
