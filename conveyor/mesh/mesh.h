// The device mesh of 3D parallelism: world = dp x tp x pp ranks, each rank at one
// coordinate (dp, tp, pp).
//
//   dp: data-parallel replica (its own slice of every batch; gradients summed across dp)
//   tp: tensor-parallel shard (a slice of every weight matrix; activations all-reduced)
//   pp: pipeline rank (a slice of the layers; activations sent to the neighbour)
//
// The order says which axis varies fastest over consecutive ranks. The default, tp-dp-pp
// (Megatron-LM's), puts a TP group on consecutive ranks, so on one node when ranks fill the
// nodes in order; then DP; PP varies slowest, so pipeline neighbours sit on different nodes:
//
//   dp 2 x tp 2 x pp 2, order tp-dp-pp, 4 ranks per node
//
//            node 0                        node 1
//     pp 0: [ r0  r1 ] [ r2  r3 ]    pp 1: [ r4  r5 ] [ r6  r7 ]
//            dp 0       dp 1                dp 0       dp 1
//            tp 0 1     tp 0 1              tp 0 1     tp 0 1
//
//   TP groups {0,1} {2,3} {4,5} {6,7}; DP groups {0,2} {1,3} {4,6} {5,7};
//   PP groups {0,4} {1,5} {2,6} {3,7}.
//
// Immutable after construction; safe to share across threads. Pure (no torch).
#ifndef CONVEYOR_MESH_MESH_H_
#define CONVEYOR_MESH_MESH_H_

#include <array>
#include <string>
#include <string_view>
#include <vector>

namespace conveyor {

enum class MeshAxis { kDp = 0, kTp = 1, kPp = 2 };

// "dp", "tp" or "pp".
std::string_view MeshAxisName(MeshAxis axis);

struct MeshCoords {
  int dp = 0;
  int tp = 0;
  int pp = 0;

  int at(MeshAxis axis) const;
  bool operator==(const MeshCoords&) const = default;
};

class Mesh {
 public:
  // The axes from the fastest-varying to the slowest.
  using Order = std::array<MeshAxis, 3>;
  static constexpr Order kDefaultOrder = {MeshAxis::kTp, MeshAxis::kDp, MeshAxis::kPp};

  // "tp-dp-pp" (any permutation of the three names, joined by '-') as an Order. UserError
  // naming `text` otherwise.
  static Order ParseOrder(std::string_view text);
  static std::string OrderName(const Order& order);

  // A mesh of `world` ranks. `dp` 0 means world / (tp * pp). UserError naming the numbers
  // when a size is below 1 (dp may be 0), when tp * pp does not divide world, or when
  // dp * tp * pp != world.
  static Mesh Make(int world, int dp, int tp, int pp, const Order& order = kDefaultOrder);

  int size() const { return dp_ * tp_ * pp_; }
  int dp() const { return dp_; }
  int tp() const { return tp_; }
  int pp() const { return pp_; }
  int extent(MeshAxis axis) const;
  const Order& order() const { return order_; }

  // Precondition (asserted): rank in [0, size()), coordinates within the extents.
  MeshCoords coords(int rank) const;
  int rank_of(const MeshCoords& coords) const;

  // The ranks that differ from `rank` only along `axis`, ordered by that coordinate (so a
  // rank's position in its group is its coordinate on the axis).
  std::vector<int> GroupOf(MeshAxis axis, int rank) const;
  // Every group along `axis`, each as GroupOf gives it, ordered by their lowest rank: the
  // same list on every rank (create process groups in this order).
  std::vector<std::vector<int>> Groups(MeshAxis axis) const;

  // "dp 2 x tp 2 x pp 2 (8 ranks, order tp-dp-pp)".
  std::string Describe() const;

 private:
  Mesh(int dp, int tp, int pp, const Order& order) : dp_(dp), tp_(tp), pp_(pp), order_(order) {}

  int dp_, tp_, pp_;
  Order order_;
};

}  // namespace conveyor

#endif  // CONVEYOR_MESH_MESH_H_
