// InterruptWatcher: turns SIGINT and SIGTERM into calls on a thread of its own.
//
// While an InterruptWatcher lives, SIGINT and SIGTERM no longer end the process: the signal
// handler only writes the signal's number into a pipe, and the watcher's thread calls
// `on_signal(signal, count)` for each one, where `count` is 1 for the first signal, 2 for the
// second, and so on. The callback decides what stopping means (forward the signal, abort the
// communication, exit); it runs outside signal context, so it may take locks, allocate and
// call exit functions. The handler works whichever thread the kernel delivers the signal to.
// A signal that was ignored when the watcher was created (SIG_IGN, as under nohup or for a
// background job of a script) stays ignored.
//
// Ownership and thread-safety: at most one InterruptWatcher exists in a process at a time
// (the constructor asserts it). Construct and destroy it on one thread; the destructor
// restores the dispositions that were in place before and joins the thread, so `on_signal`
// is not running and never runs once it returns. A signal that arrives while the callback
// runs is handled after it returns.
#ifndef CONVEYOR_LAUNCH_INTERRUPT_WATCHER_H_
#define CONVEYOR_LAUNCH_INTERRUPT_WATCHER_H_

#include <signal.h>

#include <functional>
#include <thread>

namespace conveyor {

class InterruptWatcher {
 public:
  explicit InterruptWatcher(std::function<void(int signal, int count)> on_signal);
  ~InterruptWatcher();

  InterruptWatcher(const InterruptWatcher&) = delete;
  InterruptWatcher& operator=(const InterruptWatcher&) = delete;

 private:
  void Run();

  std::function<void(int, int)> on_signal_;
  int pipe_[2] = {-1, -1};  // read end, write end
  struct sigaction previous_int_ {};
  struct sigaction previous_term_ {};
  std::thread thread_;
};

}  // namespace conveyor

#endif  // CONVEYOR_LAUNCH_INTERRUPT_WATCHER_H_
