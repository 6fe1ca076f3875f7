#include "conveyor/profile/memory_tracker.h"

#include <ATen/ATen.h>
#include <c10/core/CPUAllocator.h>
#include <gtest/gtest.h>

#include <string>

#include "conveyor/common/error.h"

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

// A limit refuses the allocation that would pass it, with the bytes and the limit's name,
// and allows it again once lifted.
TEST(MemoryTrackerTest, ALimitRefusesTheAllocationThatWouldPassIt) {
  ASSERT_TRUE(MemoryTracker::Install());
  const int64_t before = MemoryTracker::current_bytes();
  MemoryTracker::SetLimit(before + (2 << 20), "the test's 2 MiB");
  EXPECT_NO_THROW(at::empty({1 << 18}, at::kFloat));  // 1 MiB
  try {
    at::empty({1 << 20}, at::kFloat);  // 4 MiB
    ADD_FAILURE() << "4 MiB were allowed under a limit of 2 MiB more";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("memory limit: 4194304 bytes more would make"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("over the test's 2 MiB"), std::string::npos) << e.what();
  }
  EXPECT_EQ(MemoryTracker::current_bytes(), before) << "the refused bytes were counted";
  MemoryTracker::SetLimit(0, "");
  EXPECT_EQ(MemoryTracker::limit(), 0);
  EXPECT_NO_THROW(at::empty({1 << 20}, at::kFloat));
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
