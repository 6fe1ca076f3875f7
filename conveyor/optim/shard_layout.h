// ShardLayout: how ZeRO stage 1 cuts one rank's parameters among the replicas of its
// data-parallel group, as the optimizer (ShardedAdamW), the gradient reduction
// (DataParallelReducer) and the gradient norm (PipelineGradients) all see it.
//
// The parameters, in the order given (the trainer's Parameters(): a name twice for two local
// copies gives two entries), are flattened into one vector of numel() elements, which is cut
// into shards() contiguous ranges whose lengths differ by at most one (Range). Replica
// `index` owns range index: it keeps and updates the optimizer state of those elements only.
//
// Gradients: those of parameters outside `whole` are reduce-scattered across the replicas,
// so that each replica holds the summed gradient of its own range of them only (scattered());
// those named in `whole` (parameters with copies on other pipeline ranks or twice on this
// one, whose gradients PipelineGradients::SumShared later sums as whole tensors) are all-reduced.
//
// Value type; immutable; thread-safe. The parameters are identified by their tensors (the
// same TensorImpl), which must outlive the layout's use.
#ifndef CONVEYOR_OPTIM_SHARD_LAYOUT_H_
#define CONVEYOR_OPTIM_SHARD_LAYOUT_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "conveyor/module/stage_module.h"

namespace conveyor {

class ShardLayout {
 public:
  // Preconditions (asserted): `params` non-empty, shards >= 1, index in [0, shards).
  ShardLayout(const NamedTensors& params, int shards, int index, std::set<std::string> whole = {});

  // [begin, end) of range `index` when `numel` elements are cut into `shards` contiguous
  // ranges whose lengths differ by at most one (the first numel % shards one longer).
  static std::pair<int64_t, int64_t> Range(int64_t numel, int shards, int index);

  int64_t numel() const { return numel_; }
  int shards() const { return shards_; }
  int index() const { return index_; }
  // Range `shard` of the flat vector.
  std::pair<int64_t, int64_t> range(int shard) const { return Range(numel_, shards_, shard); }

  // The part of flat elements [begin, begin + n) that lies in range `shard`, as flat
  // [lo, hi) with begin <= lo <= hi <= begin + n (lo == hi when they do not meet).
  std::pair<int64_t, int64_t> Overlap(int64_t begin, int64_t n, int shard) const;

  // Where parameter tensor `p` (one of the layout's, by identity) starts in the flat vector.
  int64_t OffsetOf(const at::Tensor& p) const;

  // Whether the gradient of parameter `name` is reduce-scattered (not named in `whole`).
  bool scattered(const std::string& name) const { return whole_.count(name) == 0; }

 private:
  int64_t numel_ = 0;
  int shards_;
  int index_;
  std::map<const void*, int64_t> offsets_;  // by TensorImpl
  std::set<std::string> whole_;
};

}  // namespace conveyor

#endif  // CONVEYOR_OPTIM_SHARD_LAYOUT_H_
