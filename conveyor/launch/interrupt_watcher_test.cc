#include "conveyor/launch/interrupt_watcher.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <utility>
#include <vector>

namespace conveyor {
namespace {

// What the callback saw, with a bounded wait for it.
struct Seen {
  std::mutex mutex;
  std::condition_variable cv;
  std::vector<std::pair<int, int>> calls;  // (signal, count)

  bool WaitFor(size_t n) {
    std::unique_lock<std::mutex> lock(mutex);
    return cv.wait_for(lock, std::chrono::seconds(30), [&] { return calls.size() >= n; });
  }
};

TEST(InterruptWatcherTest, SignalsBecomeCallsCountedInOrder) {
  Seen seen;
  {
    InterruptWatcher watcher([&](int signal, int count) {
      std::lock_guard<std::mutex> lock(seen.mutex);
      seen.calls.emplace_back(signal, count);
      seen.cv.notify_all();
    });
    raise(SIGTERM);
    ASSERT_TRUE(seen.WaitFor(1)) << "SIGTERM never reached the callback";
    raise(SIGINT);
    ASSERT_TRUE(seen.WaitFor(2)) << "SIGINT never reached the callback";
  }
  ASSERT_EQ(seen.calls.size(), 2u);
  EXPECT_EQ(seen.calls[0], std::make_pair(SIGTERM, 1));
  EXPECT_EQ(seen.calls[1], std::make_pair(SIGINT, 2));
}

TEST(InterruptWatcherTest, RestoresThePreviousHandlers) {
  struct sigaction before {};
  sigaction(SIGINT, nullptr, &before);
  {
    InterruptWatcher watcher([](int, int) {});
    struct sigaction during {};
    sigaction(SIGINT, nullptr, &during);
    EXPECT_NE(during.sa_handler, before.sa_handler);
  }
  struct sigaction after {};
  sigaction(SIGINT, nullptr, &after);
  EXPECT_EQ(after.sa_handler, before.sa_handler);
}

TEST(InterruptWatcherTest, AnIgnoredSignalStaysIgnored) {
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  struct sigaction before {};
  sigaction(SIGTERM, &ignore, &before);
  {
    InterruptWatcher watcher([](int, int) {});
    struct sigaction during {};
    sigaction(SIGTERM, nullptr, &during);
    EXPECT_EQ(during.sa_handler, SIG_IGN);
  }
  sigaction(SIGTERM, &before, nullptr);
}

}  // namespace
}  // namespace conveyor
