#include "conveyor/launch/launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <iomanip>
#include <iostream>
#include <optional>
#include <sstream>

#include "conveyor/common/env.h"
#include "conveyor/common/error.h"
#include "conveyor/launch/interrupt_watcher.h"

namespace conveyor {
namespace {

using Clock = std::chrono::steady_clock;

constexpr auto kPollSlice = std::chrono::milliseconds(50);
constexpr auto kDrainAfterExit = std::chrono::milliseconds(500);

// A child's streams, in the order of Child::fds.
enum Stream { kStdout = 0, kStderr = 1, kReport = 2, kStreams = 3 };

// One child: its pipes, the partial lines read so far and its stderr tail.
struct Child {
  RankOutcome outcome;
  bool running = true;
  int fds[kStreams] = {-1, -1, -1};  // read ends; -1 once closed
  std::string partial[kStreams];
  std::deque<std::string> tail;
};

std::vector<std::string> ChildEnvironment(const LaunchOptions& options, int nproc, int rank,
                                          int port, int report_fd) {
  Environment env = ProcessEnvironment();
  for (const auto& [key, value] : options.extra_env) env[key] = value;
  env["RANK"] = std::to_string(rank);
  env["LOCAL_RANK"] = std::to_string(rank);
  env["WORLD_SIZE"] = std::to_string(nproc);
  env["LOCAL_WORLD_SIZE"] = std::to_string(nproc);
  env["MASTER_ADDR"] = "127.0.0.1";
  env["MASTER_PORT"] = std::to_string(port);
  env[kReportFdVariable] = std::to_string(report_fd);
  std::vector<std::string> entries;
  for (const auto& [key, value] : env) entries.push_back(key + "=" + value);
  return entries;
}

std::vector<char*> Pointers(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  for (std::string& s : strings) pointers.push_back(s.data());
  pointers.push_back(nullptr);
  return pointers;
}

// Starts one rank. Everything the child touches is prepared before fork: between fork and
// exec only async-signal-safe calls run.
// With `inherit_stdout` the child writes to the launcher's own stdout (a terminal stays one).
void Spawn(Child& child, const std::vector<std::string>& argv, const LaunchOptions& options,
           int nproc, int port, bool inherit_stdout) {
  int pipes[kStreams][2];
  for (auto& p : pipes) {
    CONVEYOR_CHECK(pipe2(p, O_CLOEXEC) == 0) << "launcher: cannot create pipes for rank "
                                             << child.outcome.rank << ": " << std::strerror(errno);
  }
  std::vector<std::string> args_storage = argv;
  std::vector<std::string> env_storage =
      ChildEnvironment(options, nproc, child.outcome.rank, port, pipes[kReport][1]);
  std::vector<char*> args = Pointers(args_storage);
  std::vector<char*> envp = Pointers(env_storage);
  static const char kExecFailed[] = "launcher: cannot execute the command\n";
  const pid_t launcher = getpid();
  // SIGINT and SIGTERM stay blocked across the fork until the child has its own handlers:
  // one sent to the child before that would run the launcher's handler there, which reports
  // it on the launcher's pipe as if the launcher had been interrupted.
  sigset_t interrupts, before;
  sigemptyset(&interrupts);
  sigaddset(&interrupts, SIGINT);
  sigaddset(&interrupts, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &interrupts, &before);
  pid_t pid = fork();
  if (pid == 0) {
    signal(SIGINT, SIG_DFL);  // the launcher's handlers are not the rank's
    signal(SIGTERM, SIG_DFL);
    pthread_sigmask(SIG_SETMASK, &before, nullptr);
    setpgid(0, 0);
    // Die with the launcher; if it already died, its signal was missed: leave now.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != launcher) _exit(128 + SIGKILL);
    if (!inherit_stdout) dup2(pipes[kStdout][1], STDOUT_FILENO);
    dup2(pipes[kStderr][1], STDERR_FILENO);
    fcntl(pipes[kReport][1], F_SETFD, 0);  // kept across exec
    execvpe(args[0], args.data(), envp.data());
    (void)!write(pipes[kReport][1], kExecFailed, sizeof(kExecFailed) - 1);
    _exit(127);
  }
  pthread_sigmask(SIG_SETMASK, &before, nullptr);
  CONVEYOR_CHECK(pid >= 0) << "launcher: cannot fork rank " << child.outcome.rank << ": "
                           << std::strerror(errno);
  setpgid(pid, pid);  // also here, so a signal sent right away reaches the group
  for (auto& p : pipes) close(p[1]);
  if (inherit_stdout) {
    close(pipes[kStdout][0]);
    pipes[kStdout][0] = -1;
  }
  child.outcome.pid = pid;
  for (int s = 0; s < kStreams; ++s) child.fds[s] = pipes[s][0];
}

// "1, 2 and 5"
std::string ListRanks(const std::vector<int>& ranks) {
  std::ostringstream out;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i > 0) out << (i + 1 == ranks.size() ? " and " : ", ");
    out << ranks[i];
  }
  return out.str();
}

class Supervisor {
 public:
  Supervisor(int nproc, const LaunchOptions& options)
      : children_(nproc),
        options_(options),
        out_(options.out ? *options.out : std::cout),
        err_(options.err ? *options.err : std::cerr) {}

  LaunchResult Run(const std::vector<std::string>& argv) {
    InterruptWatcher watcher([this](int signal, int count) {
      int none = 0;
      first_signal_.compare_exchange_strong(none, signal);
      signals_.store(count);
    });
    int port = PickFreePort();
    for (size_t r = 0; r < children_.size(); ++r) {
      Child& child = children_[r];
      child.outcome.rank = static_cast<int>(r);
      try {
        Spawn(child, argv, options_, static_cast<int>(children_.size()), port,
              r == 0 && options_.output == LaunchOptions::Output::kRank0Direct);
      } catch (...) {
        KillStarted();
        throw;
      }
    }
    start_ = Clock::now();
    std::optional<Clock::time_point> all_exited;
    while (AnyOpen() && !(all_exited && Clock::now() - *all_exited > kDrainAfterExit)) {
      PollOutput();
      Reap();
      HandleSignals();
      Enforce();
      if (!AnyRunning() && !all_exited) all_exited = Clock::now();
    }
    LaunchResult result;
    for (Child& child : children_) {
      for (int fd : child.fds) {
        if (fd >= 0) close(fd);
      }
      for (int s = 0; s < kStreams; ++s) {
        if (!child.partial[s].empty()) Line(child, static_cast<Stream>(s), child.partial[s]);
      }
      child.outcome.last_stderr_lines.assign(child.tail.begin(), child.tail.end());
      result.ranks.push_back(child.outcome);
    }
    result.deadline_exceeded = deadline_exceeded_;
    result.interrupt_signal = interrupt_signal_;
    if (interrupt_signal_ != 0) {
      result.stop_time =
          std::chrono::duration_cast<std::chrono::milliseconds>(last_exit_ - interrupted_at_);
    } else if (failed_rank_ < 0 && !deadline_exceeded_) {
      failed_rank_ = Cause();
    }
    result.failed_rank = failed_rank_;
    return result;
  }

 private:
  bool AnyOpen() const {
    for (const Child& c : children_) {
      if (c.running) return true;
      for (int fd : c.fds) {
        if (fd >= 0) return true;
      }
    }
    return false;
  }

  bool AnyRunning() const {
    for (const Child& c : children_) {
      if (c.running) return true;
    }
    return false;
  }

  void PollOutput() {
    std::vector<pollfd> fds;
    std::vector<std::pair<Child*, int>> owners;
    for (Child& child : children_) {
      for (int s = 0; s < kStreams; ++s) {
        if (child.fds[s] < 0) continue;
        fds.push_back({child.fds[s], POLLIN, 0});
        owners.push_back({&child, s});
      }
    }
    if (fds.empty()) {
      usleep(std::chrono::microseconds(kPollSlice).count() / 5);
      return;
    }
    if (poll(fds.data(), fds.size(), kPollSlice.count()) <= 0) return;
    char buffer[4096];
    for (size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      auto [child, s] = owners[i];
      ssize_t n = read(fds[i].fd, buffer, sizeof(buffer));
      if (n <= 0) {
        if (n < 0 && errno == EINTR) continue;
        close(child->fds[s]);
        child->fds[s] = -1;
        continue;
      }
      std::string& partial = child->partial[s];
      partial.append(buffer, n);
      for (size_t eol; (eol = partial.find('\n')) != std::string::npos;) {
        Line(*child, static_cast<Stream>(s), partial.substr(0, eol));
        partial.erase(0, eol + 1);
      }
    }
  }

  void Line(Child& child, Stream stream, const std::string& line) {
    RankOutcome& outcome = child.outcome;
    if (stream == kReport) {
      outcome.report += (outcome.report.empty() ? "" : "\n") + line;
      return;
    }
    if (options_.output == LaunchOptions::Output::kAllPrefixed) {
      out_ << "[rank " << outcome.rank << "] " << line << "\n" << std::flush;
    } else if (options_.output == LaunchOptions::Output::kRank0Direct) {
      if (outcome.rank == 0 && stream == kStderr) err_ << line << "\n" << std::flush;
    } else if (outcome.rank == 0) {
      (stream == kStderr ? err_ : out_) << line << "\n" << std::flush;
    }
    if (stream != kStderr) return;
    child.tail.push_back(line);
    while (static_cast<int>(child.tail.size()) > options_.tail_lines) child.tail.pop_front();
  }

  void Reap() {
    for (Child& child : children_) {
      int status = 0;
      if (!child.running || waitpid(child.outcome.pid, &status, WNOHANG | WUNTRACED | WCONTINUED) !=
                                child.outcome.pid) {
        continue;
      }
      RankOutcome& outcome = child.outcome;
      if (WIFSTOPPED(status) || WIFCONTINUED(status)) {
        outcome.stop_signal = WIFSTOPPED(status) ? WSTOPSIG(status) : 0;
        continue;
      }
      child.running = false;
      last_exit_ = Clock::now();
      outcome.exited = WIFEXITED(status);
      outcome.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 0;
      outcome.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
      if (outcome.ok() || outcome.stopped_by_launcher || failed_rank_ >= 0) continue;
      if (outcome.exited && outcome.exit_code == kExitPeerFailed) {
        // A failure somewhere: the others get the grace period to stop as this one did.
        if (options_.stop_all_on_failure && !peers_deadline_) {
          peers_deadline_ = last_exit_ + options_.grace;
        }
        continue;
      }
      failed_rank_ = outcome.rank;
      if (options_.stop_all_on_failure) StopAll();
    }
  }

  // The rank to blame when none failed on its own: one that had to be killed while its
  // peers stopped for a failure (one seen stopped first), else the first that stopped for a
  // peer's failure, else any that failed.
  int Cause() const {
    int hung = -1, stopped = -1, peer = -1, other = -1;
    for (const Child& child : children_) {
      const RankOutcome& o = child.outcome;
      if (o.ok()) continue;
      if (o.hung && o.stop_signal != 0 && stopped < 0) stopped = o.rank;
      if (o.hung && hung < 0) hung = o.rank;
      if (o.exited && o.exit_code == kExitPeerFailed && peer < 0) peer = o.rank;
      if (!o.stopped_by_launcher && other < 0) other = o.rank;
    }
    for (int rank : {stopped, hung, peer, other}) {
      if (rank >= 0) return rank;
    }
    return -1;
  }

  void HandleSignals() {
    const int count = signals_.load();
    if (count == signals_handled_) return;
    signals_handled_ = count;
    if (interrupt_signal_ == 0) {
      interrupt_signal_ = first_signal_.load();
      interrupted_at_ = Clock::now();
      last_exit_ = interrupted_at_;
      for (Child& child : children_) {
        if (!child.running) continue;
        child.outcome.stopped_by_launcher = true;
        kill(-child.outcome.pid, interrupt_signal_);
      }
      kill_at_ = interrupted_at_ + options_.grace;
    }
    if (count >= 2) kill_at_ = Clock::now();
  }

  void Enforce() {
    auto now = Clock::now();
    if (options_.deadline.count() > 0 && !deadline_exceeded_ && now - start_ > options_.deadline) {
      deadline_exceeded_ = true;
      StopAll();
    }
    if (peers_deadline_ && now > *peers_deadline_) {
      peers_deadline_.reset();
      if (failed_rank_ < 0 && interrupt_signal_ == 0) {
        for (Child& child : children_) {
          if (!child.running) continue;
          child.outcome.hung = true;
          child.outcome.stopped_by_launcher = true;
          kill(-child.outcome.pid, SIGKILL);
        }
      }
    }
    if (kill_at_ && now >= *kill_at_) {
      for (Child& child : children_) {
        if (child.running) kill(-child.outcome.pid, SIGKILL);
      }
      kill_at_.reset();
    }
  }

  // After a failed start: kills and reaps the ranks already started.
  void KillStarted() {
    for (Child& child : children_) {
      if (child.outcome.pid <= 0) continue;
      kill(-child.outcome.pid, SIGKILL);
      waitpid(child.outcome.pid, nullptr, 0);
      for (int fd : child.fds) {
        if (fd >= 0) close(fd);
      }
    }
  }

  void StopAll() {
    for (Child& child : children_) {
      if (!child.running || child.outcome.stopped_by_launcher) continue;
      child.outcome.stopped_by_launcher = true;
      kill(-child.outcome.pid, SIGTERM);
    }
    if (!kill_at_) kill_at_ = Clock::now() + options_.grace;
  }

  std::vector<Child> children_;
  const LaunchOptions& options_;
  std::ostream& out_;
  std::ostream& err_;
  Clock::time_point start_;
  Clock::time_point last_exit_;
  std::optional<Clock::time_point> kill_at_;
  std::optional<Clock::time_point> peers_deadline_;
  int failed_rank_ = -1;
  bool deadline_exceeded_ = false;
  // Written by the InterruptWatcher's thread, read by the loop.
  std::atomic<int> first_signal_{0};
  std::atomic<int> signals_{0};
  int signals_handled_ = 0;
  int interrupt_signal_ = 0;
  Clock::time_point interrupted_at_;
};

}  // namespace

bool LaunchedByConveyor() { return std::getenv(kReportFdVariable) != nullptr; }

bool ReportToLauncher(const std::string& message) {
  const int fd = static_cast<int>(EnvInt(kReportFdVariable, -1, 0, INT_MAX));
  if (fd < 0) return false;
  const std::string text = message + "\n";
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += n;
  }
  return true;
}

std::string RankOutcome::Describe() const {
  std::ostringstream out;
  out << "rank " << rank;
  if (hung) {
    out << " did not stop when the others did";
    if (stop_signal != 0) {
      out << " (it was stopped by signal " << stop_signal << ", " << strsignal(stop_signal) << ")";
    }
    out << " and was killed";
    return out.str();
  }
  if (exited) {
    out << " exited with exit code " << exit_code;
    if (exit_code == kExitBlamed) out << " (its peers stopped because it stalled)";
  } else {
    out << " died of signal " << signal << " (" << strsignal(signal) << ")";
  }
  if (stopped_by_launcher) out << " after the launcher stopped it";
  return out.str();
}

bool LaunchResult::ok() const {
  if (failed_rank >= 0 || deadline_exceeded || interrupt_signal != 0) return false;
  for (const RankOutcome& r : ranks) {
    if (!r.ok()) return false;
  }
  return true;
}

std::string LaunchResult::Report() const {
  std::ostringstream out;
  if (ok()) {
    out << "all " << ranks.size() << " ranks exited with exit code 0";
    return out.str();
  }
  if (interrupt_signal != 0) {
    int killed = 0;
    for (const RankOutcome& r : ranks) killed += !r.exited && r.signal == SIGKILL;
    out << "interrupted by SIG" << sigabbrev_np(interrupt_signal) << ": " << ranks.size()
        << " ranks stopped in " << std::fixed << std::setprecision(1) << stop_time.count() / 1000.0
        << " s";
    if (killed > 0) out << " (" << killed << " killed)";
    return out.str();
  }
  // The error, once: the cause's own report, else the one its peers stopped for.
  const RankOutcome* failed = failed_rank >= 0 ? &ranks[failed_rank] : nullptr;
  std::string error = failed != nullptr ? failed->report : "";
  for (const RankOutcome& r : ranks) {
    if (error.empty() && r.exited && r.exit_code == kExitPeerFailed) error = r.report;
  }
  if (error.empty() && failed != nullptr && !failed->last_stderr_lines.empty()) {
    error = "rank " + std::to_string(failed_rank) + "'s last stderr lines:";
    for (const std::string& line : failed->last_stderr_lines) error += "\n  " + line;
  }
  if (!error.empty()) out << error << "\n";
  // The summary.
  if (failed != nullptr) {
    out << failed->Describe();
  } else if (deadline_exceeded) {
    out << "the run exceeded its deadline";
  } else {
    out << "the run failed";
  }
  std::vector<int> stopped;
  for (const RankOutcome& r : ranks) {
    if (r.rank != failed_rank && !r.ok()) stopped.push_back(r.rank);
  }
  if (!stopped.empty()) {
    out << "; rank" << (stopped.size() > 1 ? "s " : " ") << ListRanks(stopped) << " stopped";
  }
  return out.str();
}

int LaunchResult::ExitCode() const {
  if (ok()) return 0;
  if (interrupt_signal != 0) return 128 + interrupt_signal;
  if (failed_rank >= 0) {
    const RankOutcome& failed = ranks[failed_rank];
    if (failed.hung) return 1;
    return failed.exited ? failed.exit_code : 128 + failed.signal;
  }
  return deadline_exceeded ? 124 : 1;
}

LaunchResult LaunchLocal(int nproc, const std::vector<std::string>& argv,
                         const LaunchOptions& options) {
  CONVEYOR_CHECK(nproc >= 1) << "launcher: --nproc must be at least 1, got " << nproc;
  CONVEYOR_CHECK(!argv.empty() && !argv[0].empty()) << "launcher: no command to run";
  CONVEYOR_CHECK(options.tail_lines >= 0) << "launcher: tail_lines " << options.tail_lines;
  return Supervisor(nproc, options).Run(argv);
}

}  // namespace conveyor
