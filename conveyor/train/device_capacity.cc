#include "conveyor/train/device_capacity.h"

#include <poll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "conveyor/common/process_stats.h"
#include "conveyor/common/statistics.h"
#include "conveyor/device/stream_order.h"

namespace conveyor {
namespace {

// One double from `fd`, waiting at most a minute; false on end of file, error or timeout.
bool ReadSeconds(int fd, double* seconds) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, 60000) == 1 && read(fd, seconds, sizeof(*seconds)) == sizeof(*seconds);
}

// Now on the steady clock, which every process of the machine shares, in seconds.
double ClockSeconds() {
  return std::chrono::duration<double>(ProfileClock::now().time_since_epoch()).count();
}

// The CPU's Capacity: `count` processes (forked, each with its own copy of `block`) computing
// `iterations` forwards each, as ranks run. With `ring` 0 each computes on, as ranks that keep
// a core of their own do. Ranks that outnumber the cores take turns, and a pipeline's ranks
// do so at every message, a rank that waits giving its core to another and resuming colder,
// wherever a core frees: with `ring` > 0 the processes form a ring, as a pipeline's stages
// do, each waiting for a message from the one before it, computing once and handing a message
// to the next, `ring` messages going round (one each in the steady state of a pipeline that
// keeps every rank busy; one alone where a single rank computes at a time). Each child warms
// up (its copy-on-write pages copied), says so, waits for the start, computes and writes its
// end time to a pipe. The start and the last end in `began` and `last`; false when a child
// could not be started or did not report within a minute.
bool TimeProcesses(Layer& block, const at::Tensor& x, const MicroBatch& mb, int count, int ring,
                   int iterations, const ProfileDevice& on, double* began, double* last) {
  std::vector<int> fds;  // go, times, then each child's inbox: read end, write end
  auto close_all = [&fds] {
    for (int fd : fds) close(fd);
    fds.clear();
  };
  for (int p = 0; p < 2 + count; ++p) {
    int ends[2];
    if (pipe(ends) != 0) {
      close_all();
      return false;
    }
    fds.push_back(ends[0]), fds.push_back(ends[1]);
  }
  const int go_read = fds[0], go_write = fds[1], times_read = fds[2], times_write = fds[3];
  auto inbox_read = [&fds](int c) { return fds[4 + 2 * c]; };
  auto inbox_write = [&fds](int c) { return fds[5 + 2 * c]; };
  char byte = 'm';
  for (int m = 0; m < ring; ++m) {  // spread over the ring
    if (write(inbox_write(m * count / ring), &byte, 1) != 1) {
      close_all();
      return false;
    }
  }
  std::vector<pid_t> children;
  const pid_t parent = getpid();
  for (int c = 0; c < count; ++c) {
    const pid_t pid = fork();
    if (pid == 0) {  // the child, which leaves without any cleanup
      // It dies with the profiling process, however that ends (killed too: no orphans).
      if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) _exit(1);
      double seconds = -1;
      try {
        RunForwards(block, x, mb, 1, on);
        const double ready = 0;
        bool ok = write(times_write, &ready, sizeof(ready)) == sizeof(ready) &&
                  read(go_read, &byte, 1) == 1;
        for (int i = 0; ok && i < iterations; ++i) {
          ok = ring == 0 || read(inbox_read(c), &byte, 1) == 1;
          if (ok) RunForwards(block, x, mb, 1, on);
          ok = ok && (ring == 0 || write(inbox_write((c + 1) % count), &byte, 1) == 1);
        }
        if (ok) seconds = ClockSeconds();
      } catch (...) {
      }
      _exit(write(times_write, &seconds, sizeof(seconds)) == sizeof(seconds) ? 0 : 1);
    }
    if (pid > 0) children.push_back(pid);
  }
  double seconds = 0;
  bool ready = children.size() == static_cast<size_t>(count);
  for (size_t c = 0; ready && c < children.size(); ++c) {
    ready = ReadSeconds(times_read, &seconds) && seconds == 0;
  }
  const std::string bytes(children.size(), 'g');
  *began = *last = ClockSeconds();
  if (ready)
    ready = write(go_write, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size());
  int reported = 0;
  while (ready && reported < count && ReadSeconds(times_read, &seconds) && seconds > 0) {
    *last = std::max(*last, seconds), ++reported;
  }
  // A child still waiting is killed: every child holds the pipes' write ends open.
  for (pid_t pid : children) {
    if (reported < count) kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
  close_all();
  return reported == count;
}

// A GPU's Capacity: `ranks` busy threads, each with its own copy of the block and a stream of
// its own, as ranks as threads sharing one GPU run (train/pipeline_model.h): kernels of
// several streams overlap where one stream alone leaves the GPU idle. False when one failed.
bool TimeThreads(const ModelTask& model, int index, const at::Tensor& x, const MicroBatch& mb,
                 int ranks, int iterations, const ProfileDevice& on, double* began, double* last) {
  std::vector<std::shared_ptr<Layer>> blocks;
  for (int r = 0; r < ranks; ++r) blocks.push_back(LayerOn(model, index, on.device));
  std::mutex mutex;
  std::condition_variable changed;
  int ready = 0;
  bool go = false;
  std::vector<double> ends(ranks, -1);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      bool warm = true;
      try {
        ComputeOnOwnStream(on.device);
        RunForwards(*blocks[r], x, mb, 1, on);
      } catch (...) {
        warm = false;
      }
      {
        std::unique_lock<std::mutex> lock(mutex);
        ++ready;
        changed.notify_all();
        changed.wait(lock, [&] { return go; });
      }
      try {
        if (warm) RunForwards(*blocks[r], x, mb, iterations, on), ends[r] = ClockSeconds();
      } catch (...) {
      }
    });
  }
  {
    std::unique_lock<std::mutex> lock(mutex);
    changed.wait(lock, [&] { return ready == ranks; });
    *began = ClockSeconds();
    go = true;
    changed.notify_all();
  }
  for (std::thread& thread : threads) thread.join();
  *last = *std::max_element(ends.begin(), ends.end());
  return *std::min_element(ends.begin(), ends.end()) > 0;
}

// The busy counts Capacities measures for `ranks` ranks: every count up to 8, then counts
// about 1.5 times apart, and `ranks` (17 for 256 ranks, each running every rank when
// the ranks take turns); the counts between are interpolated.
std::vector<int> MeasuredBusyCounts(int ranks) {
  std::vector<int> counts;
  for (int busy = 1; busy <= ranks; busy = busy < 8 ? busy + 1 : busy * 3 / 2) {
    counts.push_back(busy);
  }
  if (counts.back() != ranks) counts.push_back(ranks);
  return counts;
}

}  // namespace

std::vector<double> Capacities(const ModelTask& model, int index, const at::Tensor& x,
                               const MicroBatch& mb, int ranks, double forward_s,
                               const ProfileDevice& on) {
  const std::shared_ptr<Layer> block = LayerOn(model, index, on.device);
  RunForwards(*block, x, mb, 1, on);  // warm
  const int lone = std::max(3, static_cast<int>(0.2 / std::max(forward_s, 1e-6)));
  // A forward's time alone before the ranks, between their counts and after them: the median
  // (a shared machine's speed drifts over seconds, and a neighbour's burst during one sample
  // had put 2 processes on 2 cores at 2.7 lone ranks' worth).
  auto time_alone = [&] {
    const auto start = Now(on.device);
    RunForwards(*block, x, mb, lone, on);
    return Since(on.device, start) / lone;
  };
  std::vector<double> alone = {time_alone()};
  std::vector<double> out;
  // More ranks than cores take turns: all of them in a ring, `busy` messages going round.
  const int cores = AvailableCores();
  const bool turns = on.device.is_cpu() && ranks > cores;
  const std::vector<int> counts = MeasuredBusyCounts(ranks);
  for (int busy : counts) {
    const int processes = turns ? ranks : busy;
    const int iterations =
        std::max(3, static_cast<int>(0.5 / (processes * std::max(forward_s, 1e-6))));
    double began = 0, last = 0;
    const bool ran = on.device.is_cpu()
                         ? TimeProcesses(*block, x, mb, processes, turns ? busy : 0, iterations, on,
                                         &began, &last)
                         : TimeThreads(model, index, x, mb, busy, iterations, on, &began, &last);
    if (!ran || last <= began) return {};
    out.push_back(processes * iterations / (last - began));  // forwards a second
    alone.push_back(time_alone());
  }
  const double alone_s = Median(alone);
  std::vector<double> capacity;
  for (size_t m = 0; m < counts.size(); ++m) {
    for (int busy = m == 0 ? 1 : counts[m - 1] + 1; busy <= counts[m]; ++busy) {
      const double share =
          m == 0 ? 1 : static_cast<double>(busy - counts[m - 1]) / (counts[m] - counts[m - 1]);
      double worth = (m == 0 ? out[m] : out[m - 1] + share * (out[m] - out[m - 1])) * alone_s;
      // Single-threaded processes on the CPU do at most one lone rank's work a core.
      if (on.device.is_cpu()) worth = std::min(worth, std::min<double>(busy, cores));
      capacity.push_back(worth);
    }
  }
  return capacity;
}

}  // namespace conveyor
