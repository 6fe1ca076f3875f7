#include "conveyor/nn/weight_cast.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <c10/util/intrusive_ptr.h>

#include <map>
#include <mutex>
#include <utility>
#include <vector>

namespace conveyor {
namespace {

struct Entry {
  // Weak: the cache does not keep a weight alive, and the address of one it saw is not
  // reused while the entry stands (the pointer keeps the object's memory).
  c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl> weight;
  int64_t version = 0;
  const void* data = nullptr;
  std::vector<int64_t> sizes;
  at::Tensor cast;

  bool Serves(const at::Tensor& w) const {
    return !weight.expired() && version == w._version() && data == w.data_ptr() &&
           w.sizes() == at::IntArrayRef(sizes);
  }
};

struct Cache {
  std::mutex mu;
  int users = 0;  // live WeightCastCaches
  std::map<std::pair<const c10::TensorImpl*, c10::ScalarType>, Entry> entries;
  int64_t casts = 0, reused = 0;
};

Cache& TheCache() {
  static Cache* cache = new Cache;  // never destroyed: used until the process exits
  return *cache;
}

}  // namespace

at::Tensor CastWeight(const at::Tensor& weight, c10::ScalarType dtype) {
  if (weight.scalar_type() == dtype) return weight;
  at::NoGradGuard no_grad;
  Cache& cache = TheCache();
  const auto key =
      std::pair{static_cast<const c10::TensorImpl*>(weight.unsafeGetTensorImpl()), dtype};
  bool keep;
  {
    std::lock_guard<std::mutex> lock(cache.mu);
    keep = cache.users > 0;
    const auto it = keep ? cache.entries.find(key) : cache.entries.end();
    if (it != cache.entries.end() && it->second.Serves(weight)) {
      ++cache.reused;
      return it->second.cast;
    }
    ++cache.casts;
  }
  at::Tensor cast = weight.to(dtype);  // outside the lock: other threads' products go on
  if (!keep) return cast;
  std::lock_guard<std::mutex> lock(cache.mu);
  if (cache.users == 0) return cast;  // the last cache went meanwhile
  // Entries of freed weights go first.
  for (auto it = cache.entries.begin(); it != cache.entries.end();) {
    it = it->second.weight.expired() ? cache.entries.erase(it) : std::next(it);
  }
  cache.entries.insert_or_assign(
      key, Entry{c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>(
                     weight.getIntrusivePtr()),
                 weight._version(), weight.data_ptr(), weight.sizes().vec(), cast});
  return cast;
}

WeightCastCache::WeightCastCache() {
  Cache& cache = TheCache();
  std::lock_guard<std::mutex> lock(cache.mu);
  ++cache.users;
}

WeightCastCache::~WeightCastCache() {
  Cache& cache = TheCache();
  std::map<std::pair<const c10::TensorImpl*, c10::ScalarType>, Entry> freed;
  {
    std::lock_guard<std::mutex> lock(cache.mu);
    if (--cache.users == 0) freed.swap(cache.entries);
  }
}  // the copies are freed here, outside the lock

int64_t WeightCastCache::casts() {
  Cache& cache = TheCache();
  std::lock_guard<std::mutex> lock(cache.mu);
  return cache.casts;
}

int64_t WeightCastCache::reused() {
  Cache& cache = TheCache();
  std::lock_guard<std::mutex> lock(cache.mu);
  return cache.reused;
}

}  // namespace conveyor
