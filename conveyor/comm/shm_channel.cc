#include "conveyor/comm/shm_channel.h"

#include <linux/futex.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <deque>
#include <random>
#include <sstream>
#include <utility>

#include "conveyor/comm/shm_segment.h"
#include "conveyor/common/error.h"

namespace conveyor {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::uint32_t kMessageMagic = 0x6d736721;
constexpr std::uint64_t kChunk = 64 << 10;  // bytes copied between publications
constexpr auto kSleepSlice = std::chrono::milliseconds(10);
constexpr char kPrefix[] = "conveyor/shm/";

struct MessageHeader {
  std::uint32_t magic;
  std::uint32_t unused;
  std::uint64_t tag;
  std::uint64_t nbytes;
};
constexpr std::uint64_t kMessageHeaderBytes = sizeof(MessageHeader);
static_assert(kMessageHeaderBytes == 24);

template <typename T>
std::atomic_ref<T> Atomic(T& value) {
  return std::atomic_ref<T>(value);
}

void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

void FutexWait(std::uint32_t* word, std::uint32_t expected, std::chrono::nanoseconds timeout) {
  if (timeout.count() <= 0) return;
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(timeout.count() / 1000000000);
  ts.tv_nsec = static_cast<long>(timeout.count() % 1000000000);
  syscall(SYS_futex, word, FUTEX_WAIT, expected, &ts, nullptr, 0);  // EAGAIN, EINTR: fine
}

void FutexWakeAll(std::uint32_t* word) {
  syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

}  // namespace

struct ShmChannel::Op {
  Op(bool is_send, int peer_rank, std::uint64_t message_tag, std::byte* bytes, std::uint64_t n,
     std::shared_ptr<void> owner)
      : send(is_send),
        peer(peer_rank),
        tag(message_tag),
        data(bytes),
        nbytes(n),
        keep(std::move(owner)) {}

  const bool send;
  const int peer;
  const std::uint64_t tag;
  std::byte* const data;
  const std::uint64_t nbytes;
  std::uint64_t moved = 0;   // payload bytes written (send)
  bool header_sent = false;  // send
  std::atomic<bool> done{false};
  Status failure = Status::kDone;  // set when it cannot complete
  std::string detail;
  std::shared_ptr<void> keep;  // released on completion
};

namespace {

// An unexpected message, held until its receive is posted.
struct Stashed {
  std::unique_ptr<std::byte[]> data;
  std::uint64_t nbytes = 0;
  bool complete = false;
};

}  // namespace

// The message being read from a peer's ring: into a receive, a stash entry, or nowhere
// (its receive failed).
struct ShmChannel::Incoming {
  bool active = false;
  std::uint64_t nbytes = 0;
  std::uint64_t received = 0;
  std::shared_ptr<Op> op;
  std::shared_ptr<Stashed> stash;
};

struct ShmChannel::Peer {
  int rank = 0;
  pid_t pid = 0;
  int pidfd = -1;
  bool exited = false;
  std::unique_ptr<ShmSegment> segment;  // the peer's: its doorbell, our ring to it
  ShmRing out;                          // in the peer's segment
  ShmRing in;                           // in ours
  std::uint64_t out_head = 0;           // our copy of out.head (we are its only writer)
  std::uint64_t out_tail = 0;           // last tail seen
  std::uint64_t in_tail = 0;            // our copy of in.tail (we are its only reader)
  std::deque<std::shared_ptr<Op>> sends;
  std::map<std::uint64_t, std::deque<std::shared_ptr<Op>>> posted;
  std::map<std::uint64_t, std::deque<std::shared_ptr<Stashed>>> stash;
  Incoming current;

  ~Peer() {
    if (pidfd >= 0) close(pidfd);
  }
};

namespace {

void Complete(ShmChannel::Op& op) {
  op.keep.reset();
  op.done.store(true, std::memory_order_release);
}

}  // namespace

ShmChannel::Background::Background(std::shared_ptr<ShmChannel> channel)
    : channel_(std::move(channel)) {
  std::lock_guard<std::mutex> lock(channel_->mutex_);
  ++channel_->helpers_wanted_;
  if (!channel_->helper_.joinable()) {
    channel_->helper_ = std::thread([c = channel_.get()] { c->Helper(); });
  }
  channel_->helper_cv_.notify_all();
}

ShmChannel::Background::~Background() {
  if (!channel_) return;
  {
    std::lock_guard<std::mutex> lock(channel_->mutex_);
    --channel_->helpers_wanted_;
  }
  channel_->WakeSelf();  // out of its futex sleep, to park
}

ShmChannel::ShmChannel(std::shared_ptr<AbortSignal> abort) : abort_(std::move(abort)) {}

ShmChannel::~ShmChannel() {
  wake_on_abort_ = AbortSignal::Subscription();  // its callback uses own_
  {
    std::lock_guard<std::mutex> lock(mutex_);
    helper_quit_ = true;
  }
  helper_cv_.notify_all();
  if (helper_.joinable()) {
    WakeSelf();
    helper_.join();
  }
}

std::shared_ptr<ShmChannel> ShmChannel::Connect(int rank, int world_size, const std::string& host,
                                                Store& store, std::shared_ptr<AbortSignal> abort,
                                                const ShmChannelOptions& options,
                                                std::string* why) {
  CONVEYOR_CHECK(options.ring_bytes >= 4096 && options.ring_bytes % 64 == 0)
      << "shared-memory ring size must be a multiple of 64, at least 4096; got "
      << options.ring_bytes;
  CONVEYOR_ASSERT(host.find('\n') == std::string::npos) << "bad host identity";
  const std::string k = kPrefix;
  if (rank == 0) {
    std::random_device random;
    std::ostringstream run;
    run << std::hex << random() << random();
    store.Set(k + "run", run.str());
  }
  store.Set(k + "host/" + std::to_string(rank), host + "\n" + std::to_string(getpid()));
  const std::string run = store.Get(k + "run");

  std::vector<int> local;   // the ranks on this host, this one included
  std::map<int, int> pids;  // by rank
  for (int r = 0; r < world_size; ++r) {
    std::string value = store.Get(k + "host/" + std::to_string(r));
    std::size_t newline = value.find('\n');
    if (host.empty() || value.substr(0, newline) != host) continue;
    local.push_back(r);
    pids[r] = std::stoi(value.substr(newline + 1));
  }

  std::shared_ptr<ShmChannel> channel(new ShmChannel(abort));
  channel->spin_ = options.spin;
  std::string error;
  try {
    if (local.size() > 1) error = channel->MapSegments(rank, local, pids, run, store, options);
    // Everyone has mapped what they could: agree, then unlink.
    if (!error.empty()) {
      store.Set(k + "error", "rank " + std::to_string(rank) + ": " + error);
      store.Add(k + "failed", 1);
    }
    if (store.Add(k + "mapped", 1) == world_size) store.Set(k + "agreed", "1");
    store.Get(k + "agreed");
  } catch (...) {
    // Giving up (a rank did not arrive): unlink every segment here, a dead rank's included.
    for (int r : local) shm_unlink(ShmSegment::Name(run, r).c_str());
    throw;
  }
  if (channel->own_) channel->own_->Unlink();
  if (store.Add(k + "failed", 0) != 0) {
    if (why != nullptr) *why = store.Get(k + "error");
    return nullptr;
  }
  if (channel->peers_.empty()) return nullptr;
  ShmChannel* self = channel.get();
  channel->wake_on_abort_ = channel->abort_->Subscribe([self] { self->WakeSelf(); });
  return channel;
}

std::string ShmChannel::MapSegments(int rank, const std::vector<int>& local,
                                    const std::map<int, int>& pids, const std::string& run,
                                    Store& store, const ShmChannelOptions& options) {
  const std::string k = kPrefix;
  std::string error;
  const std::size_t rings = local.size() - 1;
  const std::size_t bytes = ShmSegment::Bytes(rings, options.ring_bytes);
  // The slot of `sender` in the segment of `receiver`: senders in rank order.
  auto slot = [&](int receiver, int sender) {
    auto at = std::find(local.begin(), local.end(), sender) - local.begin();
    return static_cast<std::size_t>(at - (sender > receiver ? 1 : 0));
  };
  try {
    own_ = ShmSegment::Map(ShmSegment::Name(run, rank), bytes, /*create=*/true);
    ShmSegmentHeader& h = own_->header();
    h.magic = ShmSegmentHeader::kMagic;
    h.ring_bytes = options.ring_bytes;
    h.rings = rings;
  } catch (const std::exception& e) {
    error = e.what();
  }
  store.Set(k + "created/" + std::to_string(rank), error.empty() ? "ok" : error);
  for (int r : local) {
    if (r == rank || !error.empty()) continue;
    std::string status = store.Get(k + "created/" + std::to_string(r));
    if (status != "ok") {
      error = "rank " + std::to_string(r) + " could not create its segment (" + status + ")";
      continue;
    }
    try {
      auto peer = std::make_unique<Peer>();
      peer->rank = r;
      peer->pid = pids.at(r);
#ifdef SYS_pidfd_open
      peer->pidfd = static_cast<int>(syscall(SYS_pidfd_open, peer->pid, 0));
#endif
      peer->segment = ShmSegment::Map(ShmSegment::Name(run, r), bytes, /*create=*/false);
      const ShmSegmentHeader& h = peer->segment->header();
      if (h.magic != ShmSegmentHeader::kMagic || h.ring_bytes != options.ring_bytes ||
          h.rings != rings) {
        throw std::runtime_error("the segment of rank " + std::to_string(r) +
                                 " has another layout");
      }
      std::size_t out = slot(r, rank), in = slot(rank, r);
      peer->out = {&peer->segment->control(out, options.ring_bytes),
                   peer->segment->data(out, options.ring_bytes), options.ring_bytes};
      peer->in = {&own_->control(in, options.ring_bytes), own_->data(in, options.ring_bytes),
                  options.ring_bytes};
      peers_[r] = std::move(peer);
    } catch (const std::exception& e) {
      error = "mapping the segment of rank " + std::to_string(r) + ": " + e.what();
    }
  }
  return error;
}

bool ShmChannel::Reaches(int peer) const { return peers_.count(peer) != 0; }

std::shared_ptr<ShmChannel::Op> ShmChannel::Send(const void* data, std::size_t nbytes, int dst,
                                                 std::uint64_t tag, std::shared_ptr<void> keep) {
  auto op = std::make_shared<Op>(true, dst, tag, static_cast<std::byte*>(const_cast<void*>(data)),
                                 nbytes, std::move(keep));
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = peers_.find(dst);
  CONVEYOR_ASSERT(it != peers_.end()) << "rank " << dst << " is not reached by shared memory";
  it->second->sends.push_back(op);
  Progress(/*stash=*/false);
  return op;
}

std::shared_ptr<ShmChannel::Op> ShmChannel::Recv(void* data, std::size_t nbytes, int src,
                                                 std::uint64_t tag, std::shared_ptr<void> keep) {
  auto op =
      std::make_shared<Op>(false, src, tag, static_cast<std::byte*>(data), nbytes, std::move(keep));
  std::lock_guard<std::mutex> lock(mutex_);
  auto peer_it = peers_.find(src);
  CONVEYOR_ASSERT(peer_it != peers_.end()) << "rank " << src << " is not reached by shared memory";
  Peer& peer = *peer_it->second;
  auto stashed = peer.stash.find(tag);
  if (stashed == peer.stash.end()) {
    peer.posted[tag].push_back(op);
  } else {
    std::shared_ptr<Stashed> message = std::move(stashed->second.front());
    stashed->second.pop_front();
    if (stashed->second.empty()) peer.stash.erase(stashed);
    const bool current = peer.current.active && peer.current.stash == message;
    if (message->nbytes != nbytes) {
      op->failure = Status::kSizeMismatch;
      op->detail = "the message has " + std::to_string(message->nbytes) + " bytes, the buffer " +
                   std::to_string(nbytes);
      if (current) peer.current.stash = nullptr;  // the rest goes nowhere
    } else if (current) {
      // Still arriving: what came so far moves over, the rest lands in the buffer directly.
      if (peer.current.received > 0) {
        std::memcpy(op->data, message->data.get(), peer.current.received);
      }
      peer.current.stash = nullptr;
      peer.current.op = op;
    } else {
      CONVEYOR_ASSERT(message->complete) << "a stashed message is neither complete nor current";
      if (nbytes > 0) std::memcpy(op->data, message->data.get(), nbytes);
      Complete(*op);
    }
  }
  Progress(/*stash=*/false);
  return op;
}

bool ShmChannel::Progress(bool stash) {
  bool moved = false;
  for (auto& [rank, peer] : peers_) moved |= Push(*peer);
  for (auto& [rank, peer] : peers_) moved |= Drain(*peer, stash);
  if (moved && sleeping_ > 0) WakeSelf();  // another thread may wait for what moved
  return moved;
}

bool ShmChannel::Push(Peer& peer) {
  ShmRing& ring = peer.out;
  ShmRingControl& control = *ring.control;
  bool moved = false;
  bool rung = false;
  while (!peer.sends.empty()) {
    Op& op = *peer.sends.front();
    const std::uint64_t need = op.header_sent ? 1 : kMessageHeaderBytes;
    std::uint64_t free = ring.capacity - (peer.out_head - peer.out_tail);
    if (free < need) {
      peer.out_tail = Atomic(control.tail).load(std::memory_order_acquire);
      free = ring.capacity - (peer.out_head - peer.out_tail);
    }
    if (free < need) {
      // Ask the consumer to ring us when it frees space, then look once more (it may have
      // freed some before it could see the request).
      Atomic(control.want_space).store(1, std::memory_order_seq_cst);
      std::atomic_thread_fence(std::memory_order_seq_cst);
      peer.out_tail = Atomic(control.tail).load(std::memory_order_acquire);
      free = ring.capacity - (peer.out_head - peer.out_tail);
      if (free < need) break;
    }
    if (!op.header_sent) {
      MessageHeader header{kMessageMagic, 0, op.tag, op.nbytes};
      ring.CopyIn(peer.out_head, reinterpret_cast<const std::byte*>(&header), sizeof(header));
      peer.out_head += kMessageHeaderBytes;
      free -= kMessageHeaderBytes;
      op.header_sent = true;
    }
    std::uint64_t n = std::min(free, op.nbytes - op.moved);
    do {
      // In chunks, published one by one, so the receiver copies out while we copy in.
      std::uint64_t chunk = std::min(n, kChunk);
      ring.CopyIn(peer.out_head, op.data + op.moved, chunk);
      peer.out_head += chunk;
      op.moved += chunk;
      n -= chunk;
      Atomic(control.head).store(peer.out_head, std::memory_order_release);
      if (!rung && n > 0) {
        Ring(peer);  // a large message: the receiver may start on the first chunk
        rung = true;
      }
    } while (n > 0);
    moved = true;
    if (op.moved < op.nbytes) continue;  // the ring is full now: the check above waits
    Complete(op);
    peer.sends.pop_front();
  }
  if (moved) Ring(peer);
  return moved;
}

bool ShmChannel::Drain(Peer& peer, bool stash) {
  ShmRing& ring = peer.in;
  ShmRingControl& control = *ring.control;
  std::uint64_t head = Atomic(control.head).load(std::memory_order_acquire);
  bool moved = false;
  auto release = [&](bool final) {
    Atomic(control.tail).store(peer.in_tail, std::memory_order_release);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (Atomic(control.want_space).load(std::memory_order_relaxed) == 0) return;
    // A blocked sender: ring it once a quarter of the ring is free (or when done here).
    const std::uint64_t free = ring.capacity - (head - peer.in_tail);
    if ((final || free >= ring.capacity / 4) && Atomic(control.want_space).exchange(0) != 0) {
      Ring(peer);
    }
  };
  while (true) {
    Incoming& m = peer.current;
    if (!m.active) {
      if (head - peer.in_tail < kMessageHeaderBytes) {
        head = Atomic(control.head).load(std::memory_order_acquire);
        if (head - peer.in_tail < kMessageHeaderBytes) break;
      }
      MessageHeader header;
      ring.CopyOut(peer.in_tail, reinterpret_cast<std::byte*>(&header), sizeof(header));
      CONVEYOR_ASSERT(header.magic == kMessageMagic)
          << "corrupt shared-memory message from rank " << peer.rank;
      auto posted = peer.posted.find(header.tag);
      if (posted != peer.posted.end()) {
        m.op = std::move(posted->second.front());
        posted->second.pop_front();
        if (posted->second.empty()) peer.posted.erase(posted);
        if (m.op->nbytes != header.nbytes) {
          m.op->failure = Status::kSizeMismatch;
          m.op->detail = "the message has " + std::to_string(header.nbytes) +
                         " bytes, the buffer " + std::to_string(m.op->nbytes);
          m.op = nullptr;
        }
      } else if (stash) {
        m.stash = std::make_shared<Stashed>();
        m.stash->data.reset(new std::byte[header.nbytes]);
        m.stash->nbytes = header.nbytes;
        peer.stash[header.tag].push_back(m.stash);
      } else {
        break;  // leave it in the ring until its receive is posted, or a wait stashes it
      }
      m.active = true;
      m.nbytes = header.nbytes;
      m.received = 0;
      peer.in_tail += kMessageHeaderBytes;
      moved = true;
    }
    if (head == peer.in_tail && m.received < m.nbytes) {
      head = Atomic(control.head).load(std::memory_order_acquire);
      if (head == peer.in_tail) break;
    }
    std::uint64_t n = std::min({head - peer.in_tail, m.nbytes - m.received, kChunk});
    std::byte* target = m.op ? m.op->data : m.stash ? m.stash->data.get() : nullptr;
    if (target != nullptr) ring.CopyOut(peer.in_tail, target + m.received, n);
    peer.in_tail += n;
    m.received += n;
    moved = true;
    if (n > 0) release(false);
    if (m.received < m.nbytes) continue;
    if (m.op) Complete(*m.op);
    if (m.stash) m.stash->complete = true;
    m = Incoming();
  }
  if (moved) release(true);
  return moved;
}

bool ShmChannel::Alive(Peer& peer) {
  if (peer.exited) return false;
  if (peer.pidfd >= 0) {
    pollfd ready{peer.pidfd, POLLIN, 0};
    if (poll(&ready, 1, 0) > 0) peer.exited = true;
  } else if (kill(peer.pid, 0) != 0 && errno == ESRCH) {
    peer.exited = true;
  }
  return !peer.exited;
}

void ShmChannel::Ring(Peer& peer) {
  ShmSegmentHeader& h = peer.segment->header();
  // Pairs with the fence in Sleep: either the peer sees our bytes, or we see it waiting.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (Atomic(h.waiters).load(std::memory_order_relaxed) == 0) return;
  Atomic(h.doorbell).fetch_add(1, std::memory_order_seq_cst);
  FutexWakeAll(&h.doorbell);
}

void ShmChannel::WakeSelf() {
  if (!own_) return;
  ShmSegmentHeader& h = own_->header();
  Atomic(h.doorbell).fetch_add(1, std::memory_order_seq_cst);
  FutexWakeAll(&h.doorbell);
}

void ShmChannel::Sleep(std::unique_lock<std::mutex>& lock, Clock::time_point deadline) {
  ShmSegmentHeader& h = own_->header();
  Atomic(h.waiters).fetch_add(1, std::memory_order_seq_cst);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  const std::uint32_t seen = Atomic(h.doorbell).load(std::memory_order_acquire);
  if (!Progress(/*stash=*/true) && !abort_->triggered()) {
    ++sleeping_;
    lock.unlock();
    auto slice = std::min<Clock::duration>(kSleepSlice, deadline - Clock::now());
    FutexWait(&h.doorbell, seen, slice);
    lock.lock();
    --sleeping_;
  }
  Atomic(h.waiters).fetch_sub(1, std::memory_order_seq_cst);
}

ShmChannel::Outcome ShmChannel::Wait(Op& op, std::chrono::milliseconds timeout) {
  const auto start = Clock::now();
  const auto deadline = start + timeout;
  const auto spin_end = start + spin_;
  std::unique_lock<std::mutex> lock(mutex_);
  Peer& peer = *peers_.at(op.peer);
  while (true) {
    bool moved = Progress(/*stash=*/true);
    if (op.done.load(std::memory_order_acquire)) return {};
    if (op.failure != Status::kDone) return {op.failure, op.detail};
    if (abort_->triggered()) return {Status::kAborted, abort_->reason()};
    const auto now = Clock::now();
    if (now >= deadline) return {Status::kTimedOut, ""};
    if (moved) continue;
    if (now < spin_end) {
      lock.unlock();
      for (int i = 0; i < 32; ++i) CpuRelax();
      lock.lock();
      continue;
    }
    if (!Alive(peer)) {
      Progress(/*stash=*/true);  // what it wrote before it went
      if (op.done.load(std::memory_order_acquire)) return {};
      return {Status::kPeerExited, "rank " + std::to_string(peer.rank) + " (pid " +
                                       std::to_string(peer.pid) + ") exited"};
    }
    Sleep(lock, deadline);
  }
}

bool ShmChannel::Test(Op& op) {
  if (op.done.load(std::memory_order_acquire)) return true;
  std::unique_lock<std::mutex> lock(mutex_, std::try_to_lock);
  if (!lock.owns_lock()) return false;
  Progress(/*stash=*/false);
  return op.done.load(std::memory_order_acquire);
}

ShmChannel::Outcome ShmChannel::Flush(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    Progress(/*stash=*/true);
    std::string waiting_for;
    for (auto& [rank, peer] : peers_) {
      if (peer->sends.empty()) continue;
      if (Alive(*peer)) {
        waiting_for = "rank " + std::to_string(rank);
        continue;
      }
      for (auto& op : peer->sends) {
        op->failure = Status::kPeerExited;
        op->detail = "rank " + std::to_string(rank) + " exited";
      }
      peer->sends.clear();
    }
    if (waiting_for.empty()) return {};
    if (abort_->triggered()) return {Status::kAborted, abort_->reason()};
    if (Clock::now() >= deadline) return {Status::kTimedOut, waiting_for};
    Sleep(lock, deadline);
  }
}

ShmChannel::Background ShmChannel::KeepMoving() { return Background(shared_from_this()); }

void ShmChannel::Helper() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    helper_cv_.wait(lock,
                    [&] { return helper_quit_ || (helpers_wanted_ > 0 && !abort_->triggered()); });
    if (helper_quit_) return;
    if (Progress(/*stash=*/true)) continue;
    Sleep(lock, Clock::now() + kSleepSlice);
  }
}

}  // namespace conveyor
