// Contiguous split of a list of layers into stages.
//
// Partition() cuts n layers, with per-layer costs, into k contiguous non-empty slices so
// that the most loaded slice is as light as possible (exact, by dynamic programming over
// prefix sums; ties go to the earliest cut). Costs can be parameter counts, FLOPs or measured
// times; first and last layers carry their embedding / head / loss costs, so a heavy
// embedding or head naturally gets fewer neighbours (as Megatron's and Llama 3's uneven
// first and last stages do).
//
// An impossible request (fewer layers than stages, a negative cost) is a UserError naming
// the values: layers are never dropped.
#ifndef CONVEYOR_PARTITION_PARTITION_H_
#define CONVEYOR_PARTITION_PARTITION_H_

#include <vector>

namespace conveyor {

struct LayerRange {
  int begin;  // first layer
  int end;    // one past the last
  int size() const { return end - begin; }
};

// Slices for k stages, in order; precondition checked: 1 <= k <= costs.size(), costs >= 0.
std::vector<LayerRange> Partition(const std::vector<double>& costs, int stages);

// Equal costs: sizes differ by at most one, the larger first.
std::vector<LayerRange> PartitionEvenly(int layers, int stages);

// The slices of the given sizes, in order ("--stage-layers 2,3,3,2"). UserError naming
// `name` and the sizes unless they are `stages` positive numbers adding up to `layers`.
std::vector<LayerRange> PartitionBySizes(const std::vector<int>& sizes, int layers, int stages,
                                         const char* name);

// The largest slice cost of a partition.
double MaxLoad(const std::vector<double>& costs, const std::vector<LayerRange>& ranges);

}  // namespace conveyor

#endif  // CONVEYOR_PARTITION_PARTITION_H_
