// The local launcher: runs one command as N ranks on this machine.
//
// LaunchLocal starts `nproc` children of `argv` (searched in PATH), each in its own process
// group, with RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT set
// (plus LaunchOptions::extra_env), on 127.0.0.1 and a port picked free at launch. It streams
// their output ("[rank 2] ..." on every line, or rank 0's alone) and waits for all of them.
//
// Failures: when a rank exits non-zero or dies of a signal, the launcher stops the others
// (SIGTERM to their process groups, SIGKILL after the grace period) and reports which rank
// failed and how. A rank that exits with kExitPeerFailed stopped because of another rank's
// failure; once one has, the ranks still running get the grace period to do the same, and
// those that do not are killed and held to be the cause (a stalled or hung rank: the launcher
// also notes a rank it saw stopped by a signal such as SIGSTOP). An optional deadline bounds
// the whole run the same way, so a launch never hangs on a stuck rank.
//
// Reports: each child gets the write end of a pipe, its number in kReportFdVariable; a rank
// that writes its final error there (ReportToLauncher) leaves the printing to the launcher,
// which shows it once in LaunchResult::Report(); the report of a child that sent none shows
// its last stderr lines instead.
//
// Signals: while LaunchLocal runs, SIGINT and SIGTERM sent to this process are forwarded to
// every rank's process group (the ranks stop on their own: see cli/run_as_ranks.h), and the
// ranks still running after the grace period are killed; a second signal kills them at
// once. Each child also gets a parent-death signal (SIGKILL), so no rank outlives a launcher
// that is killed outright, and a child whose launcher died before that was in place exits.
//
// Thread-safety: LaunchLocal reaps only its own children and installs signal handlers for
// its duration (see InterruptWatcher): at most one LaunchLocal may run at a time in a
// process, on a thread that lives until it returns (the parent-death signal follows the
// thread that forked).
#ifndef CONVEYOR_LAUNCH_LAUNCHER_H_
#define CONVEYOR_LAUNCH_LAUNCHER_H_

#include <sys/types.h>

#include <chrono>
#include <iosfwd>
#include <string>
#include <vector>

#include "conveyor/launch/rendezvous.h"

namespace conveyor {

// The exit code of a rank that stopped because another rank failed first. The launcher does
// not count such a rank as the failure: it waits for the rank that failed on its own.
inline constexpr int kExitPeerFailed = 75;

// The exit code of a rank that stopped because its peers blamed it: it stalled (stopped,
// frozen or starved past the heartbeat window) and ran again to find the run stopped on its
// account. The launcher counts it as the failure, as it does exit code 1.
inline constexpr int kExitBlamed = 76;

// Names the file descriptor on which a launched rank may send its final error message.
inline constexpr char kReportFdVariable[] = "CONVEYOR_REPORT_FD";

// In a rank started by LaunchLocal: sends `message` (one error, any number of lines) to the
// launcher and returns true. Returns false, sending nothing, in any other process. Throws
// UserError when kReportFdVariable is set to something that is not a descriptor number.
bool ReportToLauncher(const std::string& message);

// True in a rank that LaunchLocal started (kReportFdVariable is set): the launching process
// has run the command's checks already, so the rank need not repeat them.
bool LaunchedByConveyor();

struct LaunchOptions {
  // kAllPrefixed: every rank's stdout and stderr lines to `out`, "[rank R] " before each.
  // kRank0Only: rank 0's stdout lines to `out`, its stderr lines to `err`; the others'
  // output is dropped. kRank0Direct: rank 0 writes straight to the launcher's stdout (a
  // terminal stays a terminal, for progress bars) and its stderr lines go to `err` as they
  // come; the others' stdout is dropped. Stderr is always read (for the failure report).
  enum class Output { kAllPrefixed, kRank0Only, kRank0Direct };
  Output output = Output::kAllPrefixed;
  std::ostream* out = nullptr;  // where children's output goes; nullptr: std::cout
  // Where rank 0's stderr goes under kRank0Only and kRank0Direct (nullptr: std::cerr), so
  // that progress and status lines never mix into a result written on stdout.
  std::ostream* err = nullptr;
  int tail_lines = 20;                    // stderr lines kept per rank for the report
  std::chrono::milliseconds grace{5000};  // SIGTERM to SIGKILL; peers' time to stop
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
  bool stopped_by_launcher = false;  // the launcher sent it a signal to stop
  bool hung = false;    // still running when its peers had stopped for a failure: killed
  int stop_signal = 0;  // the signal that last stopped it (SIGSTOP...) if it never continued
  std::string report;   // what it sent with ReportToLauncher
  std::vector<std::string> last_stderr_lines;

  bool ok() const { return exited && exit_code == 0; }
  // "rank 1 exited with exit code 3", "rank 2 died of signal 9 (Killed)", ...
  std::string Describe() const;
};

struct LaunchResult {
  std::vector<RankOutcome> ranks;  // index = rank
  int failed_rank = -1;            // the rank held to be the cause; -1 if none
  bool deadline_exceeded = false;
  int interrupt_signal = 0;                // the first SIGINT / SIGTERM received; 0 if none
  std::chrono::milliseconds stop_time{0};  // from that signal to the last rank's exit

  bool ok() const;
  // Why the run failed, one error then a one-line summary (lines separated by '\n'); the
  // failed rank's own report when it sent one, else its last stderr lines. A one-liner when
  // ok().
  std::string Report() const;
  // For the launcher's own exit: 0 when ok(); 128 + the signal when interrupted; else the
  // failed rank's exit code (128 + signal when it died of one, 1 when it hung); 124 past the
  // deadline; 1 otherwise.
  int ExitCode() const;
};

// Runs `argv` (argv[0] is the program) as `nproc` ranks. Throws UserError on bad arguments
// and when a child cannot be started; a child failing is reported in the result.
LaunchResult LaunchLocal(int nproc, const std::vector<std::string>& argv,
                         const LaunchOptions& options = {});

}  // namespace conveyor

#endif  // CONVEYOR_LAUNCH_LAUNCHER_H_
