#include "conveyor/comm/c10d_world.h"

#include <netdb.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <optional>
#include <thread>
#include <utility>

#include "conveyor/comm/heartbeat_monitor.h"
#include "conveyor/comm/host_sockets.h"
#include "conveyor/comm/shm_segment.h"
#include "conveyor/comm/store_connection.h"
#include "conveyor/common/env.h"
#include "conveyor/common/version.h"
#include "conveyor/launch/launcher.h"
#include "conveyor/launch/rank_settings.h"

namespace conveyor {
namespace {

using Clock = std::chrono::steady_clock;

constexpr char kFailedKey[] = "conveyor/failed";
constexpr char kExitedKey[] = "conveyor/exited";
// Ranks that read a failure published at rendezvous.
constexpr char kFailureSeenKey[] = "conveyor/failure-seen";
constexpr char kWorldSizeSetting[] = "world size (WORLD_SIZE)";
constexpr auto kExitPoll = std::chrono::milliseconds(20);
constexpr auto kArrivalPoll = std::chrono::milliseconds(50);
constexpr auto kGlooBackstop = std::chrono::seconds(10);

// Every rank's heartbeat; its first one also says that the rank has arrived.
std::string HeartbeatKey(int rank) { return "conveyor/heartbeat/" + std::to_string(rank); }
// How many processes claimed a rank (more than 1: RANK given twice), and its settings.
std::string ClaimKey(int rank) { return "conveyor/claims/" + std::to_string(rank); }
std::string SettingsKey(int rank) { return "conveyor/settings/" + std::to_string(rank); }

// "two processes claim rank 1 (RANK=1 given twice?)".
std::string TwoClaims(int rank) {
  return "two processes claim rank " + std::to_string(rank) + " (RANK=" + std::to_string(rank) +
         " given to both?): both stop";
}

std::vector<std::uint8_t> Bytes(const std::string& text) { return {text.begin(), text.end()}; }

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

C10dWorld::C10dWorld(const RendezvousInfo& info, const C10dOptions& options)
    : info_(info),
      options_(options),
      self_("rank " + std::to_string(info.rank)),
      where_(info.master_addr + ":" + std::to_string(info.master_port)),
      abort_(AbortSignal::Create()) {
  const auto deadline = Clock::now() + options.connect_timeout;
  const std::string who = self_ + " of " + std::to_string(info.world_size);
  // Causes said plainly before libtorch's store tries (and logs) its way into them.
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int resolved = getaddrinfo(info.master_addr.c_str(), nullptr, &hints, &found);
  if (found != nullptr) freeaddrinfo(found);
  if (resolved != 0) {
    throw CommError(who + ": MASTER_ADDR '" + info.master_addr +
                    "' cannot be resolved: " + gai_strerror(resolved));
  }
  if (ServesStore(info)) {
    // A second process claiming rank 0 finds this host's beacon for the port taken.
    if (!beacon_.Claim(info.master_port)) {
      throw CommError(who + ": " + TwoClaims(0) + " (the other serves the store at " + where_ +
                      ")");
    }
    if (PortInUse(info.master_port)) {
      throw CommError(who + ": MASTER_PORT " + std::to_string(info.master_port) +
                      " is in use on this host by another program; rank 0 serves the "
                      "rendezvous store there: choose a free port");
    }
  }
  // The probe is this rank's first heartbeat, which also announces the rank.
  store_ = ConnectAnswering(info, options.connect_timeout, who, where_, HeartbeatKey(info.rank));
  RankSettings settings = options.settings;
  settings.emplace_back(kWorldSizeSetting, std::to_string(info.world_size));
  settings.emplace_back("conveyor version", ConveyorVersion());
  try {
    if (store_->add(ClaimKey(info.rank), 1) > 1) {
      store_->compareSet(kFailedKey, {}, Bytes(TwoClaims(info.rank)));  // the run stops too
      throw CommError(who + ": " + TwoClaims(info.rank));
    }
    store_->set(SettingsKey(info.rank), Bytes(EncodeRankSettings(settings)));
  } catch (const CommError&) {
    throw;
  } catch (const std::exception& e) {
    throw CommError(who + ": publishing its settings at " + where_ + " failed: " + Brief(e));
  }
  AwaitArrivals(deadline);
  CompareSettings();
  try {
    watch_store_ = ConnectStore(info, false, options.stall_timeout);
    heartbeat_store_ = ConnectStore(info, false, options.stall_timeout);
    // Bound every later request of these two clients, not only their waits.
    watch_store_->wait({HeartbeatKey(info.rank)}, options.stall_timeout);
    heartbeat_store_->wait({HeartbeatKey(info.rank)}, options.stall_timeout);
  } catch (const std::exception& e) {
    throw CommError(who + ": connecting to the store " + where_ + " failed: " + Brief(e));
  }
  watcher_ = std::thread([this] { Watch(); });
  beater_ = std::thread([this] { Beat(); });
}

C10dWorld::~C10dWorld() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    beating_stopped_ = true;
  }
  cv_.notify_all();
  if (drainer_.joinable()) drainer_.join();
  if (watcher_.joinable()) watcher_.join();
  if (beater_.joinable()) beater_.join();
}

void C10dWorld::AwaitArrivals(Clock::time_point deadline) {
  std::vector<std::string> keys;
  for (int r = 0; r < info_.world_size; ++r) keys.push_back(HeartbeatKey(r));
  try {
    while (!store_->check(keys)) {
      CheckRendezvous();
      if (Clock::now() >= deadline) {
        std::string missing;
        int count = 0;
        for (int r = 0; r < info_.world_size; ++r) {
          if (store_->check({keys[r]})) continue;
          missing += (count++ == 0 ? "" : ", ") + std::to_string(r);
        }
        throw CommError(
            self_ + " of " + std::to_string(info_.world_size) + ": rendezvous at " + where_ +
            " timed out after " + Seconds(options_.connect_timeout) + ": " +
            (count == 1 ? "rank " : "ranks ") + missing + " did not arrive (" +
            std::to_string(count) + " of " + std::to_string(info_.world_size) +
            " missing; did every rank start, with the same MASTER_ADDR and MASTER_PORT?)");
      }
      std::this_thread::sleep_for(kArrivalPoll);
    }
  } catch (const CommError&) {
    throw;
  } catch (const std::exception& e) {
    throw CommError(self_ + ": waiting for the other ranks at " + where_ + " failed: " + Brief(e));
  }
}

void C10dWorld::CheckRendezvous() {
  if (store_->check({kFailedKey})) {
    const std::vector<std::uint8_t> reason = store_->get(kFailedKey);
    store_->add(kFailureSeenKey, 1);
    throw CommError(self_ + ": " + std::string(reason.begin(), reason.end()),
                    /*caused_by_peer=*/true);
  }
  if (store_->add(ClaimKey(info_.rank), 0) > 1) {
    throw CommError(self_ + ": " + TwoClaims(info_.rank));
  }
  if (beacon_.Knocked()) {  // another process claimed rank 0 (it found the beacon taken)
    store_->compareSet(kFailedKey, {}, Bytes(TwoClaims(0)));  // the run stops too
    throw CommError(self_ + ": " + TwoClaims(0));
  }
}

void C10dWorld::CompareSettings() {
  std::vector<RankSettings> by_rank;
  try {
    std::vector<std::string> keys;
    for (int r = 0; r < info_.world_size; ++r) keys.push_back(SettingsKey(r));
    store_->wait(keys, options_.connect_timeout);
    for (const std::string& key : keys) {
      const std::vector<std::uint8_t> text = store_->get(key);
      by_rank.push_back(DecodeRankSettings(std::string(text.begin(), text.end())));
    }
  } catch (const std::exception& e) {
    throw CommError(self_ + ": reading the ranks' settings at " + where_ + " failed: " + Brief(e));
  }
  CheckRendezvous();
  const std::string disagreement = RankDisagreement(by_rank);
  if (disagreement.empty()) return;
  const std::string reason =
      "the ranks were started with different settings, stopping before the first step: " +
      disagreement + " (a stale config file or environment on one node?)";
  try {
    store_->compareSet(kFailedKey, {}, Bytes(reason));  // for ranks still waiting
    store_->add(kFailureSeenKey, 1);
    // The store lives in the serving rank: it stays until every rank that claimed a place,
    // in any of the world sizes given, has read the failure (a few seconds at most).
    if (ServesStore(info_)) {
      int largest = info_.world_size;
      for (const RankSettings& settings : by_rank) {
        for (const auto& [name, value] : settings) {
          if (name == kWorldSizeSetting) largest = std::max(largest, std::atoi(value.c_str()));
        }
      }
      int claimed = 0;
      for (int r = 0; r < std::min(largest, 1 << 16); ++r) claimed += store_->check({ClaimKey(r)});
      const auto until = Clock::now() + std::chrono::seconds(5);
      while (store_->add(kFailureSeenKey, 0) < claimed && Clock::now() < until) {
        std::this_thread::sleep_for(kArrivalPoll);
      }
    }
  } catch (const std::exception&) {
  }
  throw CommError(self_ + ": " + reason);
}

void C10dWorld::ConnectShm() {
  const bool off = !EnvFlag("CONVEYOR_SHM", true);
  // Every rank takes part, an opted-out one with an empty host, so that all agree.
  const std::string host =
      options_.shared_memory_p2p && !off ? ShmSegment::HostIdentity() : std::string();
  ShmChannelOptions shm_options = options_.shm;
  shm_options.spin = std::chrono::microseconds(  // for measurements
      EnvInt("CONVEYOR_SHM_SPIN_US", shm_options.spin.count(), 0, 1000000));
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
    std::lock_guard<std::mutex> lock(watch_store_mutex_);
    std::vector<std::uint8_t> winner = watch_store_->compareSet(kFailedKey, {}, Bytes(reason));
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
      std::lock_guard<std::mutex> store_lock(watch_store_mutex_);
      if (watch_store_->check({kFailedKey})) {
        std::vector<std::uint8_t> reason = watch_store_->get(kFailedKey);
        abort_->Trigger(std::string(reason.begin(), reason.end()));
      }
    } catch (const std::exception& e) {
      abort_->Trigger(self_ + " lost the rendezvous store at " + where_ +
                      ": rank 0, which serves it, died or stalled (" + Brief(e) + ")");
    }
    lock.lock();
  }
}

void C10dWorld::Beat() {
  std::optional<HeartbeatMonitor> monitor;
  if (info_.rank == 0) monitor.emplace(info_.world_size, options_.stall_timeout, Clock::now());
  std::unique_lock<std::mutex> lock(mutex_);
  for (std::uint64_t beat = 1; !beating_stopped_; ++beat) {
    lock.unlock();
    try {
      heartbeat_store_->set(HeartbeatKey(info_.rank), Bytes(std::to_string(beat)));
      if (monitor && !abort_->triggered()) {
        for (int r = 0; r < info_.world_size; ++r) {
          std::vector<std::uint8_t> heartbeat = heartbeat_store_->get(HeartbeatKey(r));
          monitor->Observe(r, std::string(heartbeat.begin(), heartbeat.end()), Clock::now());
        }
        if (std::optional<HeartbeatMonitor::Stall> stall = monitor->FindStall(Clock::now())) {
          {
            std::lock_guard<std::mutex> stalled_lock(mutex_);
            stalled_rank_ = stall->rank;
          }
          Fail(StallFailure(stall->rank, Seconds(stall->silent)));
        }
      }
    } catch (const std::exception&) {
      // The store is gone or does not answer: the watcher reports that.
    }
    lock.lock();
    cv_.wait_for(lock, options_.heartbeat_interval, [&] { return beating_stopped_; });
  }
  lock.unlock();
  if (abort_->triggered()) return;
  try {
    heartbeat_store_->set(HeartbeatKey(info_.rank), Bytes(HeartbeatMonitor::kExited));
  } catch (const std::exception&) {
    // As above.
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

void C10dWorld::AwaitBlamedRank(int stalled) {
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  try {
    const std::vector<std::uint8_t> last = store_->get(HeartbeatKey(stalled));
    while (Clock::now() < deadline) {
      if (store_->get(HeartbeatKey(stalled)) != last) {
        // It beats again: its watcher reads the failure at its next poll.
        std::this_thread::sleep_for(3 * options_.failure_poll_interval);
        return;
      }
      std::this_thread::sleep_for(kExitPoll);
    }
  } catch (const std::exception&) {
    // The store is gone: nothing to keep up.
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
  {
    std::lock_guard<std::mutex> lock(mutex_);
    beating_stopped_ = true;
  }
  cv_.notify_all();
  if (beater_.joinable()) beater_.join();
  // After a failure the store may be frozen with a stalled rank 0: the others leave at once.
  if (abort_->triggered() && info_.rank != 0) return;
  int stalled;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stalled = stalled_rank_;
  }
  // conveyor's own launcher kills a rank still stopped and names it; other launchers do not.
  if (stalled >= 0 && !LaunchedByConveyor()) AwaitBlamedRank(stalled);
  try {
    store_->add(kExitedKey, 1);
    if (info_.rank != 0) return;
    // Rank 0 serves the store: keep it up until every rank stopped watching it, or briefly
    // when a failure means some never will.
    const auto linger = 5 * options_.failure_poll_interval;
    auto deadline = Clock::now() + (abort_->triggered() ? linger : options_.transport.timeout);
    while (store_->add(kExitedKey, 0) < info_.world_size && Clock::now() < deadline) {
      if (store_->check({kFailedKey})) deadline = std::min(deadline, Clock::now() + linger);
      std::this_thread::sleep_for(kExitPoll);
    }
  } catch (const std::exception&) {
    // The store is gone: nobody is left to wait for.
  }
}

}  // namespace conveyor
