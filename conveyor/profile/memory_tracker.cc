#include "conveyor/profile/memory_tracker.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "conveyor/common/error.h"
#include "conveyor/common/text.h"
#include "conveyor/device/torch_compat.h"

namespace conveyor {
namespace {

std::atomic<int64_t> current{0};
std::atomic<int64_t> peak{0};
std::atomic<int64_t> most{0};  // peak, never reset

void Raise(std::atomic<int64_t>& mark, int64_t now) {
  int64_t seen = mark.load();
  while (now > seen && !mark.compare_exchange_weak(seen, now)) {
  }
}
std::atomic<int64_t> cap{0};
std::mutex cap_mutex;
std::string cap_name;  // guarded by cap_mutex

[[noreturn]] void RefuseAllocation(size_t n, int64_t held, int64_t limit) {
  std::string name;
  {
    std::lock_guard<std::mutex> lock(cap_mutex);
    name = cap_name;
  }
  constexpr double kMiB = 1 << 20;
  throw UserError(Printf("memory limit: %lld bytes more would make %.1f MiB, over %s (%lld bytes)",
                         static_cast<long long>(n),
                         static_cast<double>(held + static_cast<int64_t>(n)) / kMiB, name.c_str(),
                         static_cast<long long>(limit)));
}

// Keeps the data pointer as the context (so raw_allocate / raw_deallocate keep working) and
// remembers each allocation's size until it is freed.
class CountingAllocator : public c10::Allocator {
 public:
  explicit CountingAllocator(c10::Allocator* base)
      : base_(base), base_deleter_(base->raw_deleter()) {}

  bool usable() const { return base_deleter_ != nullptr; }

  c10::DataPtr allocate(size_t n) CONVEYOR_ALLOCATE_CONST override { return Allocate(n); }
  // Overrides c10::Allocator::copy_data from torch 2.3 on; unused before.
  void copy_data(void* dest, const void* src, std::size_t count) const {
    if (count > 0) std::memcpy(dest, src, count);
  }

  c10::DeleterFnPtr raw_deleter() const override { return &Delete; }

  static CountingAllocator* instance;

 private:
  c10::DataPtr Allocate(size_t n) const {
    const int64_t limit = cap.load();
    if (limit > 0) {
      const int64_t held = current.load();
      if (held + static_cast<int64_t>(n) > limit) RefuseAllocation(n, held, limit);
    }
    c10::DataPtr inner = base_->allocate(n);
    void* data = inner.get();
    const c10::Device device = inner.device();
    inner.release_context();  // freed through base_deleter_ by Delete
    {
      std::lock_guard<std::mutex> lock(mutex_);
      sizes_[data] = n;
    }
    const int64_t now = current += static_cast<int64_t>(n);
    Raise(peak, now);
    Raise(most, now);
    return c10::DataPtr(data, data, &Delete, device);
  }

  static void Delete(void* data) {
    CountingAllocator* self = instance;
    size_t n = 0;
    {
      std::lock_guard<std::mutex> lock(self->mutex_);
      auto it = self->sizes_.find(data);
      if (it != self->sizes_.end()) {
        n = it->second;
        self->sizes_.erase(it);
      }
    }
    current -= static_cast<int64_t>(n);
    self->base_deleter_(data);
  }

  c10::Allocator* base_;
  c10::DeleterFnPtr base_deleter_;
  mutable std::mutex mutex_;
  mutable std::unordered_map<void*, size_t> sizes_;
};

CountingAllocator* CountingAllocator::instance = nullptr;
std::once_flag install_once;

}  // namespace

bool MemoryTracker::Install() {
  std::call_once(install_once, [] {
    auto* counting = new CountingAllocator(c10::GetCPUAllocator());  // lives for the process
    if (!counting->usable()) return;
    CountingAllocator::instance = counting;
    c10::SetCPUAllocator(counting, /*priority=*/100);
  });
  return installed();
}

bool MemoryTracker::installed() { return CountingAllocator::instance != nullptr; }
int64_t MemoryTracker::current_bytes() { return current.load(); }
int64_t MemoryTracker::peak_bytes() { return peak.load(); }
void MemoryTracker::ResetPeak() { peak.store(current.load()); }
int64_t MemoryTracker::max_bytes() { return most.load(); }

void MemoryTracker::SetLimit(int64_t bytes, const std::string& what) {
  CONVEYOR_ASSERT(bytes >= 0 && installed()) << "memory limit " << bytes << " without a tracker";
  {
    std::lock_guard<std::mutex> lock(cap_mutex);
    cap_name = what;
  }
  cap.store(bytes);
}

int64_t MemoryTracker::limit() { return cap.load(); }

}  // namespace conveyor
