// What the operating system counts for this process: how long ago it started, the most
// memory it has held resident, the cores it may run on, and which machine it runs on. Linux
// (/proc, getrusage, sched_getaffinity). Thread-safe.
#ifndef CONVEYOR_COMMON_PROCESS_STATS_H_
#define CONVEYOR_COMMON_PROCESS_STATS_H_

#include <cstdint>
#include <vector>

namespace conveyor {

// Seconds since this process started (the kernel's start time, in clock ticks of 10 ms on
// most systems): everything the process did before its first line of main included. Read
// from the kernel at the first call, from the steady clock after it: the differences of two
// calls are exact, the value itself known to 10 ms.
double SecondsSinceProcessStart();

// The process's peak resident set size in bytes (getrusage's ru_maxrss): its weights,
// optimizer state, activations, libraries and allocator caches, at their highest. With ranks
// as threads of one process, all of them together.
int64_t PeakResidentBytes();

// The cores this process may run on (its affinity mask; the machine's count when that cannot
// be read), at least 1.
int AvailableCores();

// The cores this process may run on as a bit mask: bit c % 64 of word c / 64 is set when it
// may run on CPU c. Every CPU of the machine when the mask cannot be read.
std::vector<uint64_t> AffinityMask();

// The machine this process runs on, as a number below 2^52 (exact in a double): a hash of
// its host name and boot id. Processes in other network namespaces of one machine (which
// share its cores) get the same number; other machines, with near certainty, another.
uint64_t MachineId();

// The machine's physical memory in bytes.
double PhysicalMemoryBytes();

}  // namespace conveyor

#endif  // CONVEYOR_COMMON_PROCESS_STATS_H_
