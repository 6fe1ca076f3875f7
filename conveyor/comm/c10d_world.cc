#include "conveyor/comm/c10d_world.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <string_view>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <utility>

namespace conveyor {
namespace {

using Clock = std::chrono::steady_clock;

constexpr char kFailedKey[] = "conveyor/failed";
constexpr char kExitedKey[] = "conveyor/exited";
constexpr auto kExitPoll = std::chrono::milliseconds(20);
constexpr auto kGlooBackstop = std::chrono::seconds(10);

// A store client; `count` makes it one of the world's main connections, which the server's
// constructor waits for.
c10::intrusive_ptr<c10d::Store> ConnectStore(const RendezvousInfo& info, bool count,
                                             std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions options;
  options.port = static_cast<std::uint16_t>(info.master_port);
  options.isServer = count && info.rank == 0;
  options.timeout = timeout;
  options.waitWorkers = count;
  if (count) options.numWorkers = info.world_size;
  return c10::make_intrusive<c10d::TCPStore>(info.master_addr, options);
}

// ShmChannel's view of the world's store.
class ShmStore : public ShmChannel::Store {
 public:
  explicit ShmStore(c10::intrusive_ptr<c10d::Store> store) : store_(std::move(store)) {}
  void Set(const std::string& key, const std::string& value) override {
    store_->set(key, std::vector<std::uint8_t>(value.begin(), value.end()));
  }
  std::string Get(const std::string& key) override {
    std::vector<std::uint8_t> value = store_->get(key);
    return std::string(value.begin(), value.end());
  }
  std::int64_t Add(const std::string& key, std::int64_t delta) override {
    return store_->add(key, delta);
  }

 private:
  c10::intrusive_ptr<c10d::Store> store_;
};

}  // namespace

std::string Brief(const std::exception& e) {
  std::string text = e.what();
  return text.substr(0, text.find('\n'));
}

C10dWorld::C10dWorld(const RendezvousInfo& info, const C10dOptions& options)
    : info_(info),
      options_(options),
      self_("rank " + std::to_string(info.rank)),
      abort_(AbortSignal::Create()) {
  std::string where = info.master_addr + ":" + std::to_string(info.master_port);
  try {
    store_ = ConnectStore(info, /*count=*/true, options.connect_timeout);
    watch_store_ = ConnectStore(info, /*count=*/false, options.connect_timeout);
  } catch (const std::exception& e) {
    throw CommError(self_ + " of " + std::to_string(info.world_size) +
                    ": rendezvous at the store " + where + " failed: " + Brief(e));
  }
  watcher_ = std::thread([this] { Watch(); });
}

C10dWorld::~C10dWorld() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (drainer_.joinable()) drainer_.join();
  if (watcher_.joinable()) watcher_.join();
}

void C10dWorld::ConnectShm() {
  const char* env = std::getenv("CONVEYOR_SHM");
  const bool off =
      env != nullptr && (std::string_view(env) == "0" || std::string_view(env) == "off" ||
                         std::string_view(env) == "false");
  // Every rank takes part, an opted-out one with an empty host, so that all agree.
  const std::string host =
      options_.shared_memory_p2p && !off ? ShmChannel::HostIdentity() : std::string();
  ShmChannelOptions shm_options = options_.shm;
  if (const char* spin = std::getenv("CONVEYOR_SHM_SPIN_US")) {
    shm_options.spin = std::chrono::microseconds(std::atoll(spin));  // for measurements
  }
  ShmStore store(store_);
  std::string why;
  try {
    shm_ =
        ShmChannel::Connect(info_.rank, info_.world_size, host, store, abort_, shm_options, &why);
  } catch (const Error&) {
    throw;  // conveyor's own: already a CommError, or a bad option
  } catch (const std::exception& e) {
    std::string what = self_ + ": setting up shared memory";
    Raise(what, what + " failed: " + Brief(e));
  }
  if (!why.empty() && info_.rank == 0) {
    std::cerr << "conveyor: shared-memory point-to-point is off, using Gloo: " << why << std::endl;
  }
}

ShmChannel::Background C10dWorld::KeepShmMoving() {
  return shm_ ? shm_->KeepMoving() : ShmChannel::Background();
}

void C10dWorld::Fail(const std::string& reason) noexcept {
  if (abort_->triggered()) return;
  std::string first = reason;
  try {
    // The first failure published wins, so every rank reports the same root cause.
    std::vector<std::uint8_t> winner = watch_store_->compareSet(
        kFailedKey, {}, std::vector<std::uint8_t>(reason.begin(), reason.end()));
    first.assign(winner.begin(), winner.end());
  } catch (const std::exception&) {
    // The store is gone (rank 0 died): every rank's watcher sees that on its own.
  }
  abort_->Trigger(first);
}

void C10dWorld::Raise(const std::string& what, const std::string& failure) {
  Fail(failure);
  if (abort_->reason() == failure) throw CommError(failure);
  throw CommError(what + " aborted: " + abort_->reason() + " (here: " + failure + ")", true);
}

void C10dWorld::Watch() {
  std::unique_lock<std::mutex> lock(mutex_);
  auto next_poll = Clock::now() + options_.failure_poll_interval;
  while (!stopping_ && !abort_->triggered()) {
    auto wake = next_poll;
    for (const auto& [id, timer] : timers_) wake = std::min(wake, timer.first);
    cv_.wait_until(lock, wake);  // also woken by AddTimer and stopping
    if (stopping_) break;
    auto now = Clock::now();
    for (auto it = timers_.begin(); it != timers_.end();) {
      if (it->second.first > now) {
        ++it;
        continue;
      }
      it->second.second();
      it = timers_.erase(it);
    }
    if (now < next_poll) continue;
    next_poll = now + options_.failure_poll_interval;
    lock.unlock();
    try {
      if (watch_store_->check({kFailedKey})) {
        std::vector<std::uint8_t> reason = watch_store_->get(kFailedKey);
        abort_->Trigger(std::string(reason.begin(), reason.end()));
      }
    } catch (const std::exception& e) {
      abort_->Trigger(self_ + " lost the rendezvous store at " + info_.master_addr + ":" +
                      std::to_string(info_.master_port) +
                      " (served by rank 0, which may have died): " + Brief(e));
    }
    lock.lock();
  }
}

std::uint64_t C10dWorld::AddTimer(std::chrono::milliseconds delay, std::function<void()> fire) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::uint64_t id = next_timer_++;
  timers_.emplace(id, std::make_pair(Clock::now() + delay, std::move(fire)));
  cv_.notify_all();
  return id;
}

void C10dWorld::CancelTimer(std::uint64_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  timers_.erase(id);
}

bool C10dWorld::AwaitFuture(const C10dOp& op) {
  struct Sync {
    std::mutex mutex;
    std::condition_variable cv;
    bool done = false;
  };
  auto sync = std::make_shared<Sync>();
  auto notify = [sync](bool finished) {
    {
      std::lock_guard<std::mutex> lock(sync->mutex);
      sync->done = sync->done || finished;
    }
    sync->cv.notify_all();
  };
  op.work->getFuture()->addCallback([notify](c10::ivalue::Future&) { notify(true); });
  AbortSignal::Subscription wake = abort_->Subscribe([notify] { notify(false); });
  std::unique_lock<std::mutex> lock(sync->mutex);
  sync->cv.wait_until(lock, Clock::now() + options_.transport.timeout,
                      [&] { return sync->done || abort_->triggered(); });
  return sync->done;
}

void C10dWorld::Wait(const C10dOp& op) {
  ShmChannel::Background keep_moving = KeepShmMoving();
  const std::chrono::milliseconds timeout = options_.transport.timeout;
  bool ok = false;
  bool timed_out = false;  // set by the timer under mutex_; read after CancelTimer
  std::string failure;     // stays empty when aborted or timed out
  {
    // Gloo point-to-point work has no future; abort() interrupts its wait, on a failure
    // elsewhere or at our deadline. Gloo's own timeout is only a backstop: it closes every
    // connection of the group, and peers would report that before this rank could publish
    // the timeout itself.
    AbortSignal::Subscription interrupt;
    std::uint64_t timer = 0;
    if (!op.pollable) {
      interrupt = abort_->Subscribe([&op] { op.work->abort(); });
      timer = AddTimer(timeout, [&] {
        timed_out = true;
        op.work->abort();
      });
    }
    bool ready = !op.pollable || AwaitFuture(op);
    if (ready && !abort_->triggered()) {
      try {
        ok = op.work->wait(timeout + kGlooBackstop);
      } catch (const std::exception& e) {
        failure = op.what + " failed: " + Brief(e);
      }
    }
    if (timer != 0) CancelTimer(timer);
    if (!ready && !abort_->triggered()) timed_out = true;
  }
  if (ok) return;
  Keep(op);
  if (timed_out) failure = op.what + " timed out after " + std::to_string(timeout.count()) + " ms";
  if (failure.empty()) throw CommError(op.what + " aborted: " + abort_->reason(), true);
  Raise(op.what, failure);
}

void C10dWorld::Keep(const C10dOp& op) {
  std::lock_guard<std::mutex> lock(mutex_);
  kept_.push_back(op);
}

void C10dWorld::Adopt(C10dOp op) {
  std::lock_guard<std::mutex> lock(mutex_);
  adopted_.push_back(std::move(op));
  if (!drainer_.joinable()) drainer_ = std::thread([this] { Drain(); });
  cv_.notify_all();
}

void C10dWorld::Drain() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    cv_.wait(lock, [&] { return stopping_ || !adopted_.empty(); });
    if (adopted_.empty()) return;  // stopping, nothing left
    C10dOp op = std::move(adopted_.front());
    adopted_.pop_front();
    lock.unlock();
    try {
      Wait(op);
    } catch (const CommError&) {
      // Published by Wait; the rank that uses the transport sees it on its next wait.
    }
    lock.lock();
  }
}

void C10dWorld::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (drainer_.joinable()) drainer_.join();
  if (watcher_.joinable()) watcher_.join();
  try {
    store_->add(kExitedKey, 1);
    if (info_.rank != 0) return;
    // Rank 0 serves the store: keep it up until every rank stopped watching it, or briefly
    // when a failure means some never will.
    auto limit =
        abort_->triggered() ? 5 * options_.failure_poll_interval : options_.transport.timeout;
    auto deadline = Clock::now() + limit;
    while (store_->add(kExitedKey, 0) < info_.world_size && Clock::now() < deadline) {
      std::this_thread::sleep_for(kExitPoll);
    }
  } catch (const std::exception&) {
    // The store is gone: nobody is left to wait for.
  }
}

}  // namespace conveyor
