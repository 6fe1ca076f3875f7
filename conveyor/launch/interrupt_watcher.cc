#include "conveyor/launch/interrupt_watcher.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "conveyor/common/error.h"

namespace conveyor {
namespace {

// The write end of the live watcher's pipe; -1 when there is none.
std::atomic<int> active_pipe{-1};

// Byte that tells the thread to stop; signal numbers are never 0.
constexpr unsigned char kStop = 0;

void OnSignal(int signal) {
  const int saved_errno = errno;
  const int fd = active_pipe.load();
  const unsigned char byte = static_cast<unsigned char>(signal);
  if (fd >= 0) (void)!write(fd, &byte, 1);
  errno = saved_errno;
}

}  // namespace

InterruptWatcher::InterruptWatcher(std::function<void(int, int)> on_signal)
    : on_signal_(std::move(on_signal)) {
  CONVEYOR_CHECK(pipe2(pipe_, O_CLOEXEC) == 0)
      << "cannot create the pipe for signal handling: " << std::strerror(errno);
  int expected = -1;
  CONVEYOR_ASSERT(active_pipe.compare_exchange_strong(expected, pipe_[1]))
      << "two InterruptWatchers at once";
  thread_ = std::thread([this] { Run(); });
  struct sigaction action {};
  action.sa_handler = OnSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGINT, &action, &previous_int_);
  sigaction(SIGTERM, &action, &previous_term_);
  // A signal this process was told to ignore (nohup, `cmd &` in a script) stays ignored.
  if (previous_int_.sa_handler == SIG_IGN) sigaction(SIGINT, &previous_int_, nullptr);
  if (previous_term_.sa_handler == SIG_IGN) sigaction(SIGTERM, &previous_term_, nullptr);
}

InterruptWatcher::~InterruptWatcher() {
  sigaction(SIGINT, &previous_int_, nullptr);
  sigaction(SIGTERM, &previous_term_, nullptr);
  (void)!write(pipe_[1], &kStop, 1);
  thread_.join();
  active_pipe.store(-1);
  close(pipe_[0]);
  close(pipe_[1]);
}

void InterruptWatcher::Run() {
  int count = 0;
  while (true) {
    unsigned char byte = kStop;
    const ssize_t n = read(pipe_[0], &byte, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n != 1 || byte == kStop) return;
    on_signal_(byte, ++count);
  }
}

}  // namespace conveyor
