// Counts the bytes of every CPU tensor libtorch allocates, for peak-memory measurements.
//
// Install() wraps libtorch's current CPU allocator (c10::SetCPUAllocator) with one that
// records the size of each allocation and takes it off again when it is freed; allocations
// made before Install() are not counted. The counts are for the whole process: with ranks
// as threads they cover all of them. CUDA memory is not seen here (its caching allocator
// keeps its own statistics).
//
// Thread-safe; Install() is idempotent. Cost: a mutex-guarded map update per allocation
// and free.
#ifndef CONVEYOR_PROFILE_MEMORY_TRACKER_H_
#define CONVEYOR_PROFILE_MEMORY_TRACKER_H_

#include <cstdint>

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
};

}  // namespace conveyor

#endif  // CONVEYOR_PROFILE_MEMORY_TRACKER_H_
