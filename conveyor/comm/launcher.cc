#include "conveyor/comm/launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <iostream>
#include <optional>
#include <sstream>

#include "conveyor/common/error.h"

extern char** environ;

namespace conveyor {
namespace {

using Clock = std::chrono::steady_clock;

constexpr auto kPollSlice = std::chrono::milliseconds(50);
constexpr auto kDrainAfterExit = std::chrono::milliseconds(500);

// One child: its pipes, the partial lines read so far and its stderr tail.
struct Child {
  RankOutcome outcome;
  bool running = true;
  int fds[2] = {-1, -1};  // stdout, stderr read ends; -1 once closed
  std::string partial[2];
  std::deque<std::string> tail;
};

std::vector<std::string> ChildEnvironment(const LaunchOptions& options, int nproc, int rank,
                                          int port) {
  Environment env;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    std::string text = *entry;
    size_t eq = text.find('=');
    if (eq != std::string::npos) env[text.substr(0, eq)] = text.substr(eq + 1);
  }
  for (const auto& [key, value] : options.extra_env) env[key] = value;
  env["RANK"] = std::to_string(rank);
  env["LOCAL_RANK"] = std::to_string(rank);
  env["WORLD_SIZE"] = std::to_string(nproc);
  env["LOCAL_WORLD_SIZE"] = std::to_string(nproc);
  env["MASTER_ADDR"] = "127.0.0.1";
  env["MASTER_PORT"] = std::to_string(port);
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
void Spawn(Child& child, std::vector<std::string> argv, std::vector<std::string> env,
           bool inherit_stdout) {
  int out[2], err[2];
  CONVEYOR_CHECK(pipe2(out, O_CLOEXEC) == 0 && pipe2(err, O_CLOEXEC) == 0)
      << "launcher: cannot create pipes for rank " << child.outcome.rank << ": "
      << std::strerror(errno);
  std::vector<char*> args = Pointers(argv);
  std::vector<char*> envp = Pointers(env);
  static const char kExecFailed[] = "launcher: cannot execute the command\n";
  pid_t pid = fork();
  CONVEYOR_CHECK(pid >= 0) << "launcher: cannot fork rank " << child.outcome.rank << ": "
                           << std::strerror(errno);
  if (pid == 0) {
    setpgid(0, 0);
    if (!inherit_stdout) dup2(out[1], STDOUT_FILENO);
    dup2(err[1], STDERR_FILENO);
    execvpe(args[0], args.data(), envp.data());
    (void)!write(STDERR_FILENO, kExecFailed, sizeof(kExecFailed) - 1);
    _exit(127);
  }
  setpgid(pid, pid);  // also here, so a signal sent right away reaches the group
  close(out[1]);
  close(err[1]);
  if (inherit_stdout) {
    close(out[0]);
    out[0] = -1;
  }
  child.outcome.pid = pid;
  child.fds[0] = out[0];
  child.fds[1] = err[0];
}

class Supervisor {
 public:
  Supervisor(int nproc, const LaunchOptions& options)
      : children_(nproc), options_(options), out_(options.out ? *options.out : std::cout) {}

  LaunchResult Run(const std::vector<std::string>& argv) {
    int port = PickFreePort();
    for (size_t r = 0; r < children_.size(); ++r) {
      children_[r].outcome.rank = static_cast<int>(r);
      try {
        Spawn(children_[r], argv, ChildEnvironment(options_, children_.size(), r, port),
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
      Enforce();
      if (!AnyRunning() && !all_exited) all_exited = Clock::now();
    }
    LaunchResult result;
    for (Child& child : children_) {
      for (int fd : child.fds) {
        if (fd >= 0) close(fd);
      }
      for (std::string& partial : child.partial) {
        if (!partial.empty()) Line(child, &partial == &child.partial[1], partial);
      }
      child.outcome.last_stderr_lines.assign(child.tail.begin(), child.tail.end());
      result.ranks.push_back(child.outcome);
    }
    result.failed_rank = failed_rank_;
    result.deadline_exceeded = deadline_exceeded_;
    return result;
  }

 private:
  bool AnyOpen() const {
    for (const Child& c : children_) {
      if (c.running || c.fds[0] >= 0 || c.fds[1] >= 0) return true;
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
      for (int s = 0; s < 2; ++s) {
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
        Line(*child, s == 1, partial.substr(0, eol));
        partial.erase(0, eol + 1);
      }
    }
  }

  void Line(Child& child, bool is_stderr, const std::string& line) {
    if (options_.output == LaunchOptions::Output::kAllPrefixed) {
      out_ << "[rank " << child.outcome.rank << "] " << line << "\n" << std::flush;
    } else if (options_.output == LaunchOptions::Output::kRank0Direct) {
      if (child.outcome.rank == 0 && is_stderr) std::cerr << line << "\n" << std::flush;
    } else if (child.outcome.rank == 0) {
      out_ << line << "\n" << std::flush;
    }
    if (!is_stderr) return;
    child.tail.push_back(line);
    while (static_cast<int>(child.tail.size()) > options_.tail_lines) child.tail.pop_front();
  }

  void Reap() {
    for (Child& child : children_) {
      int status = 0;
      if (!child.running || waitpid(child.outcome.pid, &status, WNOHANG) != child.outcome.pid) {
        continue;
      }
      child.running = false;
      child.outcome.exited = WIFEXITED(status);
      child.outcome.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 0;
      child.outcome.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
      if (child.outcome.ok() || child.outcome.stopped_by_launcher || failed_rank_ >= 0) continue;
      if (child.outcome.exited && child.outcome.exit_code == kExitPeerFailed) continue;
      failed_rank_ = child.outcome.rank;
      if (options_.stop_all_on_failure) StopAll();
    }
    // Only ranks that stopped for a peer's failure: the first of them stands for it.
    if (failed_rank_ >= 0) return;
    for (const Child& child : children_) {
      if (child.running) return;
    }
    for (const Child& child : children_) {
      if (!child.outcome.ok() && !child.outcome.stopped_by_launcher) {
        failed_rank_ = child.outcome.rank;
        return;
      }
    }
  }

  void Enforce() {
    auto now = Clock::now();
    if (options_.deadline.count() > 0 && !deadline_exceeded_ && now - start_ > options_.deadline) {
      deadline_exceeded_ = true;
      StopAll();
    }
    if (kill_at_ && now > *kill_at_) {
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
      for (int fd : child.fds) close(fd);
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
  Clock::time_point start_;
  std::optional<Clock::time_point> kill_at_;
  int failed_rank_ = -1;
  bool deadline_exceeded_ = false;
};

}  // namespace

std::string RankOutcome::Describe() const {
  std::ostringstream out;
  out << "rank " << rank;
  if (exited) {
    out << " exited with exit code " << exit_code;
  } else {
    out << " died of signal " << signal << " (" << strsignal(signal) << ")";
  }
  if (stopped_by_launcher) out << " after the launcher stopped it";
  return out.str();
}

bool LaunchResult::ok() const {
  if (failed_rank >= 0 || deadline_exceeded) return false;
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
  if (failed_rank >= 0) {
    const RankOutcome& failed = ranks[failed_rank];
    out << "rank " << failed_rank << " failed: " << failed.Describe();
    if (!failed.last_stderr_lines.empty()) {
      out << "; its last stderr lines:";
      for (const std::string& line : failed.last_stderr_lines) out << "\n  " << line;
    }
  } else if (deadline_exceeded) {
    out << "the run exceeded its deadline";
  } else {
    out << "the run failed";
  }
  for (const RankOutcome& r : ranks) {
    if (r.rank != failed_rank && !r.ok()) out << "\n" << r.Describe();
  }
  return out.str();
}

int LaunchResult::ExitCode() const {
  if (ok()) return 0;
  if (failed_rank >= 0) {
    const RankOutcome& failed = ranks[failed_rank];
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
