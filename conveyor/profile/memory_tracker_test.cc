#include "conveyor/profile/memory_tracker.h"

#include <ATen/ATen.h>
#include <c10/core/CPUAllocator.h>
#include <gtest/gtest.h>

namespace conveyor {
namespace {

TEST(MemoryTrackerTest, CountsTensorsUntilFreedAndKeepsThePeak) {
  ASSERT_TRUE(MemoryTracker::Install());
  EXPECT_TRUE(MemoryTracker::Install());  // idempotent
  const int64_t before = MemoryTracker::current_bytes();
  MemoryTracker::ResetPeak();
  {
    at::Tensor t = at::empty({1 << 20}, at::kFloat);  // 4 MiB
    EXPECT_GE(MemoryTracker::current_bytes() - before, 4 << 20);
  }
  EXPECT_LT(MemoryTracker::current_bytes() - before, 4 << 20);
  EXPECT_GE(MemoryTracker::peak_bytes() - before, 4 << 20);
  MemoryTracker::ResetPeak();
  EXPECT_LT(MemoryTracker::peak_bytes() - before, 4 << 20);
}

// raw_allocate / raw_deallocate (used by libtorch outside tensors) go through the same
// counting: the bytes appear while held and are gone once freed.
TEST(MemoryTrackerTest, RawAllocationsAreCountedAndFreed) {
  ASSERT_TRUE(MemoryTracker::Install());
  c10::Allocator* allocator = c10::GetCPUAllocator();
  const int64_t before = MemoryTracker::current_bytes();
  void* p = allocator->raw_allocate(1 << 20);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(MemoryTracker::current_bytes() - before, 1 << 20);
  static_cast<char*>(p)[(1 << 20) - 1] = 1;  // the whole block is usable
  allocator->raw_deallocate(p);
  EXPECT_EQ(MemoryTracker::current_bytes(), before);
}

}  // namespace
}  // namespace conveyor
