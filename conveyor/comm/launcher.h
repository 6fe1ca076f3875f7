// The local launcher: runs one command as N ranks on this machine.
//
// LaunchLocal starts `nproc` children of `argv` (searched in PATH), each in its own process
// group, with RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT set
// (plus LaunchOptions::extra_env), on 127.0.0.1 and a port picked free at launch. It streams
// their output ("[rank 2] ..." on every line, or rank 0's alone) and waits for all of them.
// When a rank exits non-zero or dies of a signal, it stops the others (SIGTERM to their
// process groups, SIGKILL after the grace period) and reports which rank failed and how,
// with that rank's last stderr lines. An optional deadline bounds the whole run the same way,
// so a launch never hangs on a stuck rank.
//
// Thread-safety: LaunchLocal may run on any thread; it reaps only its own children. Children
// are not stopped when the launching process itself is killed.
#ifndef CONVEYOR_COMM_LAUNCHER_H_
#define CONVEYOR_COMM_LAUNCHER_H_

#include <sys/types.h>

#include <chrono>
#include <iosfwd>
#include <string>
#include <vector>

#include "conveyor/comm/rendezvous.h"

namespace conveyor {

// The exit code of a rank that stopped because another rank failed first. The launcher does
// not count such a rank as the failure: it waits for the rank that failed on its own.
inline constexpr int kExitPeerFailed = 75;

struct LaunchOptions {
  // kRank0Direct: rank 0 writes straight to the launcher's stdout (a terminal stays a
  // terminal, for progress bars); the others' stdout is dropped. Stderr is always read.
  enum class Output { kAllPrefixed, kRank0Only, kRank0Direct };
  Output output = Output::kAllPrefixed;
  std::ostream* out = nullptr;            // where children's output goes; nullptr: std::cout
  int tail_lines = 20;                    // stderr lines kept per rank for the report
  std::chrono::milliseconds grace{5000};  // SIGTERM to SIGKILL
  std::chrono::milliseconds deadline{0};  // whole run; 0 = none
  bool stop_all_on_failure = true;        // false: let the other ranks run to the end
  Environment extra_env;                  // set in every child, before the rank variables
};

struct RankOutcome {
  int rank = 0;
  pid_t pid = 0;
  bool exited = false;  // true: exit_code is valid; false: it died of `signal`
  int exit_code = 0;
  int signal = 0;
  bool stopped_by_launcher = false;  // the launcher sent it SIGTERM / SIGKILL
  std::vector<std::string> last_stderr_lines;

  bool ok() const { return exited && exit_code == 0; }
  std::string Describe()
      const;  // "rank 1 exited with exit code 3", "rank 2 died of signal 9 (Killed)"
};

struct LaunchResult {
  std::vector<RankOutcome> ranks;  // index = rank
  int failed_rank = -1;            // the first rank that failed on its own; -1 if none did
  bool deadline_exceeded = false;

  bool ok() const;
  // What failed and why, with the failed rank's last stderr lines; a one-liner when ok().
  std::string Report() const;
  // For the launcher's own exit: 0 when ok(); else the failed rank's exit code (128 + signal
  // when it died of one); 124 past the deadline; 1 otherwise.
  int ExitCode() const;
};

// Runs `argv` (argv[0] is the program) as `nproc` ranks. Throws UserError on bad arguments
// and when a child cannot be started; a child failing is reported in the result.
LaunchResult LaunchLocal(int nproc, const std::vector<std::string>& argv,
                         const LaunchOptions& options = {});

}  // namespace conveyor

#endif  // CONVEYOR_COMM_LAUNCHER_H_
