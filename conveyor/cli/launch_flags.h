// The flag of every command that starts local ranks, --oversubscribe, and the check it
// lifts: a command refuses to fork more local processes than make sense on this machine.
#ifndef CONVEYOR_CLI_LAUNCH_FLAGS_H_
#define CONVEYOR_CLI_LAUNCH_FLAGS_H_

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string_view>

namespace conveyor {

// max(64, 8 x the machine's cores): more local ranks than this is almost always a typo.
int MaxLocalRanks();

struct LaunchFlags {
  bool oversubscribe = false;
  bool rank_threads = false;  // RanksOptions::as_threads

  // Adds --oversubscribe and --rank-threads to `cmd`; this object must outlive `cmd`.
  void Register(CLI::App* cmd);
  // Call before starting `nproc` local ranks (the value of `flag`): throws UserError naming
  // the flag, the value and MaxLocalRanks() when nproc is above it and --oversubscribe was
  // not given. Does nothing in a process that is itself a launched rank (torchrun, srun,
  // mpirun or conveyor's launcher start the ranks there, not this process).
  void CheckLocalRanks(int64_t nproc, std::string_view flag) const;
  // Call before starting `ranks` local ranks of `threads` intra-op threads each (--threads;
  // 0: the machine's share, nothing to check): throws UserError when threads x ranks exceed
  // 8 x the machine's cores without --oversubscribe. Nothing in a launched rank. (Fewer, but
  // more than the cores, are warned of by the ranks: launch/thread_share.h.)
  void CheckThreads(int64_t threads, int64_t ranks) const;
};

}  // namespace conveyor

#endif  // CONVEYOR_CLI_LAUNCH_FLAGS_H_
