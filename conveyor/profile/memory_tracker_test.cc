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

TEST(MemoryTrackerTest, RawAllocationsStillWork) {
  ASSERT_TRUE(MemoryTracker::Install());
  c10::Allocator* allocator = c10::GetCPUAllocator();
  void* p = allocator->raw_allocate(1024);
  ASSERT_NE(p, nullptr);
  allocator->raw_deallocate(p);
}

}  // namespace
}  // namespace conveyor
