// The device mesh: the world's ranks laid out over named axes, each rank at one coordinate
// per axis. The dense layers' mesh is dp x tp x pp:
//
//   dp: data-parallel replica (its own slice of every batch; gradients summed across dp)
//   tp: tensor-parallel shard (a slice of every weight matrix; activations all-reduced)
//   pp: pipeline rank (a slice of the layers; activations sent to the neighbour)
//
// and further axes are named beside them (ep: expert-parallel rank, each holding a slice of
// a Mixture-of-Experts layer's experts; cp: context-parallel rank, a slice of every
// sequence). An axis a mesh does not have has extent 1. A new axis is a new MeshAxis, its
// name, and a MeshCoords field.
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
// Expert layers run on a second mesh over the same ranks (FoldExperts, Megatron-Core's
// "parallel folding"): etp x ep x edp x pp, whose expert-parallel groups borrow the dense
// mesh's data- and tensor-parallel ranks; its pipelines must be the dense mesh's.
//
// Immutable after construction; safe to share across threads. Pure (no torch).
#ifndef CONVEYOR_MESH_MESH_H_
#define CONVEYOR_MESH_MESH_H_

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace conveyor {

enum class MeshAxis { kDp = 0, kTp = 1, kPp = 2, kEp = 3, kCp = 4 };

// "dp", "tp", "pp", "ep" or "cp".
std::string_view MeshAxisName(MeshAxis axis);

struct MeshCoords {
  int dp = 0;
  int tp = 0;
  int pp = 0;
  int ep = 0;
  int cp = 0;

  int at(MeshAxis axis) const;
  int& at(MeshAxis axis);
  bool operator==(const MeshCoords&) const = default;
};

class Mesh {
 public:
  // The axes from the fastest-varying to the slowest.
  using Order = std::vector<MeshAxis>;
  static inline const Order kDefaultOrder = {MeshAxis::kTp, MeshAxis::kDp, MeshAxis::kPp};
  // An axis and its extent.
  using Extent = std::pair<MeshAxis, int>;

  // "tp-dp-pp" as an Order: every axis of `axes` named once, joined by '-'. UserError naming
  // `text` otherwise.
  static Order ParseOrder(std::string_view text, const Order& axes = kDefaultOrder);
  static std::string OrderName(const Order& order);

  // The dense mesh of `world` ranks. `dp` 0 means world / (tp * pp). UserError naming the
  // numbers when a size is below 1 (dp may be 0), when tp * pp does not divide world, or
  // when dp * tp * pp != world. Precondition: `order` names dp, tp and pp once each.
  static Mesh Make(int world, int dp, int tp, int pp, const Order& order = kDefaultOrder);
  // A mesh of any axes, fastest-varying first, each named once with an extent of at least 1
  // whose product is `world`. UserError naming the axes otherwise.
  static Mesh Make(int world, const std::vector<Extent>& axes);

  // The expert layers' mesh over the ranks of `dense`: etp x ep x edp x pp, order
  // tp-ep-dp-pp (its tp and dp axes are the experts' own: etp and edp = world / (etp x ep x
  // pp)). UserError naming the numbers when etp x ep x pp does not divide the world, and
  // when its pipelines (pp groups) are not the dense mesh's (the order puts pp before
  // another axis), naming a rank whose pipelines differ and what to change.
  static Mesh FoldExperts(const Mesh& dense, int ep, int etp = 1);

  int size() const { return size_; }
  int dp() const { return extent(MeshAxis::kDp); }
  int tp() const { return extent(MeshAxis::kTp); }
  int pp() const { return extent(MeshAxis::kPp); }
  // 1 for an axis the mesh does not have.
  int extent(MeshAxis axis) const;
  // The mesh's axes, fastest-varying first.
  const Order& order() const { return order_; }

  // Precondition (asserted): rank in [0, size()), coordinates within the extents.
  MeshCoords coords(int rank) const;
  int rank_of(const MeshCoords& coords) const;

  // The ranks that differ from `rank` only along `axes`, ordered by their coordinates on
  // them as a number whose first axis varies fastest (so a rank's position in a one-axis
  // group is its coordinate on the axis). `axes` may name axes the mesh lacks (extent 1).
  std::vector<int> GroupOf(const Order& axes, int rank) const;
  std::vector<int> GroupOf(MeshAxis axis, int rank) const { return GroupOf(Order{axis}, rank); }
  // Every group along `axes`, each as GroupOf gives it, ordered by their lowest rank: the
  // same list on every rank (create process groups in this order).
  std::vector<std::vector<int>> Groups(const Order& axes) const;
  std::vector<std::vector<int>> Groups(MeshAxis axis) const { return Groups(Order{axis}); }

  // "dp 2 x tp 2 x pp 2 (8 ranks, order tp-dp-pp)": the axes in the order of MeshAxis.
  std::string Describe() const;

 private:
  explicit Mesh(std::vector<Extent> axes);

  std::vector<Extent> axes_;  // fastest-varying first
  Order order_;
  int size_ = 1;
};

}  // namespace conveyor

#endif  // CONVEYOR_MESH_MESH_H_
