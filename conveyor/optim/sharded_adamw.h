// ZeRO stage 1: AdamW whose state is sharded across the data-parallel replicas.
//
// Every replica holds the same parameters (the same list, in the same order: its pipeline
// stage's, or its tensor-parallel shard of them) and, after the data-parallel reduction, the
// same summed gradients. Flattened in list order into one vector of N elements, the
// parameters are cut into dp contiguous ranges of near-equal length (shard_layout.h); the
// replica of rank d in the DP group keeps exp_avg and exp_avg_sq for range d only (2 N / dp
// elements instead of 2 N) and updates only those elements, with AdamW's elementwise math
// (AdamW::UpdateAll: the same moments, bias correction, and weight decay for elements of
// parameters of two or more dimensions). The updated ranges are then all-gathered across the
// DP group (each padded to the longest range's length, as AllGather needs one shape) and
// written into every replica's parameters, so the replicas stay bitwise equal.
//
// Only this replica's range of the gradients is read: in the trainer, the reducer
// reduce-scatters them (DataParallelReducer with a ShardLayout of the same parameters), so
// each replica receives the summed gradient of its range only; the gradients of shared
// parameters (tied weights, summed whole across the pipeline afterwards) are all-reduced and
// arrive whole. Either way the elements outside the range are not read.
//
// Step and State are collective over the DP group (every replica calls them in the same
// order); LoadState is not. Not thread-safe; one per rank. REQUIRES: `group` outlives the
// optimizer, and no other thread uses it during Step and State.
#ifndef CONVEYOR_OPTIM_SHARDED_ADAMW_H_
#define CONVEYOR_OPTIM_SHARDED_ADAMW_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "conveyor/comm/transport.h"
#include "conveyor/optim/optimizer.h"
#include "conveyor/optim/shard_layout.h"

namespace conveyor {

class ShardedAdamW : public Optimizer {
 public:
  // `group`: this rank's data-parallel group; its rank() is the shard this replica owns.
  ShardedAdamW(AdamWOptions options, Transport* group);

  // Updates this replica's range of `params` and gathers the others' (collective).
  // Precondition: every parameter has a gradient, summed over the replicas at least in this
  // replica's range (the reducer gives undefined ones zeros), all parameters are contiguous
  // and of one dtype, and `params` has the same sizes at every call and on every replica.
  void Step(const NamedTensors& params, double lr, int64_t step) override;
  // Whole state: the replicas all-gather their ranges (collective; every replica gets it and
  // briefly holds the whole state).
  std::map<std::string, at::Tensor> State() const override;
  // Keeps this replica's range of the whole tensors in `state` (not collective).
  void LoadState(const NamedTensors& params,
                 const std::map<std::string, at::Tensor>& state) override;
  // This replica's range of the two moments.
  int64_t StateBytes() const override;

 private:
  // The part of parameter `param` that lies in a range: its elements [begin, begin + length)
  // are elements [at, at + length) of the range.
  struct Piece {
    size_t param;
    int64_t begin, length, at;
  };
  // Records the parameters' names and shapes and their layout the first time; checks them
  // later.
  void Bind(const NamedTensors& params);
  std::vector<Piece> PiecesOf(int shard) const;
  // The whole flat vector whose range of this replica is `mine` (collective).
  at::Tensor GatherRanges(const at::Tensor& mine) const;

  AdamWOptions options_;
  Transport* group_;
  std::vector<std::string> names_;
  std::vector<std::vector<int64_t>> shapes_;
  std::vector<int64_t> numels_;
  std::optional<ShardLayout> layout_;  // set by the first Bind
  at::Tensor exp_avg_, exp_avg_sq_;    // this replica's range; undefined before use
};

}  // namespace conveyor

#endif  // CONVEYOR_OPTIM_SHARDED_ADAMW_H_
