#include "conveyor/optim/shard_layout.h"

#include <algorithm>

#include "conveyor/common/error.h"

namespace conveyor {

ShardLayout::ShardLayout(const NamedTensors& params, int shards, int index,
                         std::set<std::string> whole)
    : shards_(shards), index_(index), whole_(std::move(whole)) {
  CONVEYOR_ASSERT(!params.empty()) << "a shard layout needs parameters";
  CONVEYOR_ASSERT(shards >= 1 && index >= 0 && index < shards) << index << " of " << shards;
  for (const auto& [name, p] : params) {
    const bool added = offsets_.emplace(p.unsafeGetTensorImpl(), numel_).second;
    CONVEYOR_ASSERT(added) << "parameter " << name << " is listed twice as one tensor";
    numel_ += p.numel();
  }
}

std::pair<int64_t, int64_t> ShardLayout::Range(int64_t numel, int shards, int index) {
  CONVEYOR_ASSERT(shards >= 1 && index >= 0 && index < shards) << index << " of " << shards;
  const int64_t base = numel / shards;
  const int64_t extra = numel % shards;
  const int64_t begin = index * base + std::min<int64_t>(index, extra);
  return {begin, begin + base + (index < extra ? 1 : 0)};
}

std::pair<int64_t, int64_t> ShardLayout::Overlap(int64_t begin, int64_t n, int shard) const {
  const auto [first, end] = range(shard);
  const int64_t lo = std::clamp(first, begin, begin + n);
  return {lo, std::clamp(end, lo, begin + n)};
}

int64_t ShardLayout::OffsetOf(const at::Tensor& p) const {
  auto it = offsets_.find(p.unsafeGetTensorImpl());
  CONVEYOR_ASSERT(it != offsets_.end())
      << "a tensor of shape " << p.sizes() << " is not one of the shard layout's parameters";
  return it->second;
}

}  // namespace conveyor
