#include "conveyor/nn/kv_cache.h"

#include <ATen/ATen.h>

#include "conveyor/common/error.h"

namespace conveyor {

std::pair<at::Tensor, at::Tensor> KvCache::Extend(const MicroBatch& mb, const at::Tensor& k,
                                                  const at::Tensor& v) {
  if (mb.cache_position < 0) {
    entries_.clear();
    return {k, v};
  }
  // Kept without autograd history: generation runs no backward.
  const at::Tensor new_k = k.detach(), new_v = v.detach();
  auto& [keys, values] = entries_[mb.index];
  if (mb.cache_position == 0) {
    keys = new_k;
    values = new_v;
    return {k, v};
  }
  const int64_t cached = keys.defined() ? keys.size(2) : 0;
  CONVEYOR_CHECK(cached == mb.cache_position && k.size(2) == 1)
      << "micro-batch " << mb.index << ": a cached forward at position " << mb.cache_position
      << " with " << k.size(2) << " tokens, but the cache holds " << cached
      << " positions (after the prefill at position 0, one token at a time)";
  keys = at::cat({keys, new_k}, 2);
  values = at::cat({values, new_v}, 2);
  return {keys, values};
}

}  // namespace conveyor
