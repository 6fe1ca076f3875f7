// Counts the bytes of every CPU tensor libtorch allocates, for peak-memory measurements.
//
// Install() wraps libtorch's current CPU allocator (c10::SetCPUAllocator) with one that
// records the size of each allocation and takes it off again when it is freed; allocations
// made before Install() are not counted. The counts are for the whole process: with ranks
// as threads they cover all of them. CUDA memory is not seen here (its caching allocator
// keeps its own statistics).
//
// A limit (SetLimit) makes the count a hard cap: an allocation that would take it past the
// limit is not made, and throws UserError naming the bytes asked, held and allowed (its
// first line; libtorch rethrows it as its own error inside backward, with the same line).
//
// Thread-safe; Install() is idempotent. Cost: a mutex-guarded map update per allocation
// and free.
#ifndef CONVEYOR_PROFILE_MEMORY_TRACKER_H_
#define CONVEYOR_PROFILE_MEMORY_TRACKER_H_

#include <cstdint>
#include <string>

namespace conveyor {

class MemoryTracker {
 public:
  // Returns false (and counts nothing) when the current CPU allocator cannot be wrapped.
  static bool Install();
  static bool installed();
  static int64_t current_bytes();
  static int64_t peak_bytes();
  // Restarts the peak from the current count.
  static void ResetPeak();
  // The most bytes held at once since Install(), never restarted.
  static int64_t max_bytes();
  // The cap on current_bytes(), 0 for none (the default); `what` names it in the error
  // ("--memory-per-rank 64.0 MiB"). Precondition: bytes >= 0, installed().
  static void SetLimit(int64_t bytes, const std::string& what);
  static int64_t limit();
};

}  // namespace conveyor

#endif  // CONVEYOR_PROFILE_MEMORY_TRACKER_H_
