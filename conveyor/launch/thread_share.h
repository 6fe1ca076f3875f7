// How many intra-op threads each rank runs: the cores of a machine divided among the ranks on
// it, whichever launcher started them.
//
// Ranks whose intra-op threads outnumber their machine's cores wait for each other's threads
// at every hand-off: 30 to 70 times slower on 2 cores with 4 ranks of 2 threads each
// (docs/BENCHMARKS.md). So unless the user chose (--threads, then OMP_NUM_THREADS, win), a
// rank takes its share of the cores it may run on (its CPU affinity: a launcher that binds
// ranks to cores gives each the cores it bound), each of those cores split evenly among the
// ranks of the machine that may run on it, and at least one thread.
//
// Who is on the machine: every rank reports its machine (host name and boot id) and affinity
// when the ranks meet. A launcher's count of the ranks on this node (LOCAL_WORLD_SIZE,
// SLURM_STEP_TASKS_PER_NODE, OMPI_COMM_WORLD_LOCAL_SIZE: RendezvousInfo) counts too where it
// is larger (ranks the reports put on other machines, e.g. containers with host names of
// their own, whose affinity is then taken to be this rank's).
//
// Pure: the standard library only. Thread-safety: stateless functions.
#ifndef CONVEYOR_LAUNCH_THREAD_SHARE_H_
#define CONVEYOR_LAUNCH_THREAD_SHARE_H_

#include <cstdint>
#include <string>
#include <vector>

namespace conveyor {

// Where one rank computes, as it reports it.
struct RankCores {
  uint64_t machine = 0;        // MachineId() (common/process_stats.h)
  std::vector<uint64_t> mask;  // AffinityMask(): bit c % 64 of word c / 64 for CPU c
};

struct ThreadShareInput {
  int threads_flag = 0;           // --threads; 0: not given
  std::string omp_num_threads;    // OMP_NUM_THREADS; "": not set
  int launcher_local = 0;         // ranks on this node by the launcher's variable; 0: unknown
  std::string launcher_variable;  // that variable and its value, for the line
  std::vector<RankCores> world;   // every rank's report, by rank
  int rank = 0;                   // this rank
};

struct ThreadShare {
  // The intra-op threads to set; 0 when OMP_NUM_THREADS is in charge (libtorch reads it).
  int threads = 0;
  // What was chosen and why, one line without a prefix, e.g. "2 intra-op threads a rank:
  // 4 ranks on this machine (OMPI_COMM_WORLD_LOCAL_SIZE=4) share its 8 cores".
  std::string line;
  // "" or one line when the chosen threads x the ranks sharing the cores exceed them.
  std::string warning;
  // Whether this rank is the lowest on its machine (the one to print the machine's warning).
  bool first_on_machine = true;
};

// REQUIRES: 0 <= rank < world.size(), every mask non-empty.
ThreadShare ShareCores(const ThreadShareInput& input);

}  // namespace conveyor

#endif  // CONVEYOR_LAUNCH_THREAD_SHARE_H_
