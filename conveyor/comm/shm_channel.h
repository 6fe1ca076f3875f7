// ShmChannel: point-to-point messages between the processes of one host through POSIX shared
// memory. The c10d transport sends CPU tensors through it between ranks on the same host
// (collectives and failure propagation stay on c10d); it is torch-free.
//
// Layout: every rank that has a peer on its host creates one segment (shm_open, a run-unique
// name) holding its doorbell and one single-producer single-consumer byte ring per local
// peer, for the messages that peer sends it; every rank maps the segments of its local
// peers. The pages are reserved (posix_fallocate: a full /dev/shm fails Connect instead of
// raising SIGBUS later) and pre-faulted. Once every rank has mapped everything, every
// segment is shm_unlink-ed, so nothing is left in /dev/shm even when a process is killed
// later; a rank that gives up during Connect unlinks every segment of its host.
//
// Messages: a 24-byte header {magic, tag, nbytes} and the payload, streamed through the ring; a
// message larger than the ring's free space (or than the ring) is written in pieces as the
// receiver frees space. Matching follows transport.h: by (source, tag), in posting order;
// receives may be posted before or after their message arrived, in any tag order, and a
// message that arrives before its receive is copied into a stash until it is posted.
//
// Progress needs no thread of its own: posting an operation pushes this process's pending
// outgoing bytes and drains the incoming ones that have a receive posted; Wait and Flush
// also stash unexpected messages and sleep when nothing moves. A send whose bytes are all in
// the ring is complete: its buffer is released at once. The exception is a caller about to
// block outside the channel (a collective over another backend): KeepMoving() runs the same
// progress on a helper thread meanwhile, so a message larger than a ring cannot deadlock
// against it. A send that did not fit otherwise advances only while this process is inside
// the channel.
//
// Blocking: each rank's segment holds a 32-bit futex doorbell. Writing bytes into a ring
// rings the receiver's doorbell, freeing space that a blocked sender waits for rings the
// sender's; a ring wakes a process only when it sleeps (FUTEX_WAKE, shared futex). A waiter
// polls for ShmChannelOptions::spin, then sleeps on its doorbell in slices of at most 10 ms,
// re-checking the AbortSignal (whose trigger also rings it), its deadline, and whether the
// peer of the awaited operation still lives (a pidfd).
//
// Ownership: Connect returns the channel by shared_ptr; a KeepMoving guard holds one too. An
// operation is held by the caller and, until it completes, by the channel (a dropped send
// is still delivered). Thread-safety: every member may be called from any thread (one lock
// inside; the futex sleep is outside it).
#ifndef CONVEYOR_COMM_SHM_CHANNEL_H_
#define CONVEYOR_COMM_SHM_CHANNEL_H_

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "conveyor/comm/abort_signal.h"

namespace conveyor {

class ShmSegment;

struct ShmChannelOptions {
  // Bytes of each ring (one per ordered pair of ranks on the host); a multiple of 64, at
  // least 4096. A rank reserves (local ranks - 1) rings in /dev/shm.
  std::size_t ring_bytes = std::size_t{4} << 20;
  // How long a wait polls before it sleeps on its doorbell. Spinning pays only on idle
  // cores: measured on 2 cores, 20 us cut a 2-rank 32 KiB hop from ~12 to ~4 us when the
  // machine was otherwise idle, but raised it to ~35 us under load, and with 4 ranks on the
  // 2 cores it doubled every hop (the spinner steals the core of the rank that sends).
  std::chrono::microseconds spin{0};
};

class ShmChannel : public std::enable_shared_from_this<ShmChannel> {
 public:
  // The key-value store the ranks meet at in Connect (the c10d store; a map in tests).
  class Store {
   public:
    virtual ~Store() = default;
    virtual void Set(const std::string& key, const std::string& value) = 0;
    // Blocks until `key` exists; throws when that takes longer than the store's timeout.
    virtual std::string Get(const std::string& key) = 0;
    // Adds `delta` to the integer at `key` (0 when absent) and returns the sum.
    virtual std::int64_t Add(const std::string& key, std::int64_t delta) = 0;
  };

  // A posted send or receive. Owned by shared_ptr by the channel while pending and by the
  // caller; opaque outside the channel.
  struct Op;

  enum class Status {
    kDone,
    kTimedOut,
    kAborted,      // the AbortSignal triggered
    kPeerExited,   // the peer process is gone and the operation cannot complete
    kSizeMismatch  // the message and the receive buffer differ in size
  };
  struct Outcome {
    Status status = Status::kDone;
    std::string detail;  // for the error message: "rank 1 (pid 42) exited", ...
  };

  // Keeps the channel progressing on a helper thread while alive (see KeepMoving). Empty
  // when default-constructed. Movable, not assignable.
  class Background {
   public:
    Background() = default;
    Background(Background&& other) noexcept : channel_(std::move(other.channel_)) {}
    Background& operator=(Background&&) = delete;
    ~Background();

   private:
    friend class ShmChannel;
    explicit Background(std::shared_ptr<ShmChannel> channel);
    std::shared_ptr<ShmChannel> channel_;
  };

  // Collective over the store: every rank of the world calls it once, with the same
  // options. `host` identifies this rank's host and shared-memory namespace
  // (ShmSegment::HostIdentity()),
  // or is empty to take no part. Ranks with the same non-empty host use shared memory with
  // each other. Returns nullptr when this rank has no such peer, or when setting up failed on
  // any rank (then every rank returns nullptr, and *why says what failed). Throws what the
  // store throws (a rank did not arrive in time). `abort` wakes and fails every wait.
  static std::shared_ptr<ShmChannel> Connect(int rank, int world_size, const std::string& host,
                                             Store& store, std::shared_ptr<AbortSignal> abort,
                                             const ShmChannelOptions& options, std::string* why);

  ~ShmChannel();
  ShmChannel(const ShmChannel&) = delete;
  ShmChannel& operator=(const ShmChannel&) = delete;

  // Whether messages to and from world rank `peer` go through this channel.
  bool Reaches(int peer) const;

  // Posts a send of `nbytes` at `data` to `dst`, or a receive of exactly `nbytes` into
  // `data` from `src`. Precondition: Reaches(peer). `data` must stay valid and untouched
  // until the operation completes; `keep` (e.g. the tensor) is held until then.
  // A tag is 64 bits: a transport's own tag and, above it, the group it belongs to.
  std::shared_ptr<Op> Send(const void* data, std::size_t nbytes, int dst, std::uint64_t tag,
                           std::shared_ptr<void> keep);
  std::shared_ptr<Op> Recv(void* data, std::size_t nbytes, int src, std::uint64_t tag,
                           std::shared_ptr<void> keep);

  // Blocks until `op` completes or fails, at most `timeout`. An operation whose wait did not
  // return kDone stays posted (its buffer stays in use); the caller treats the channel as
  // failed.
  Outcome Wait(Op& op, std::chrono::milliseconds timeout);

  // Makes progress without blocking (none when another thread is inside the channel); true
  // when `op` completed successfully.
  bool Test(Op& op);

  // Blocks until every posted send has all its bytes in its ring, at most `timeout`, draining
  // incoming messages meanwhile (into their receives or the stash); sends to peers that
  // exited are dropped (they fail with kPeerExited). kTimedOut's detail names a peer.
  Outcome Flush(std::chrono::milliseconds timeout);

  // Until the returned guard is destroyed, a helper thread (started on first use, parked
  // otherwise) pushes and drains like a Wait, sleeping on the doorbell between. For a caller
  // about to block outside the channel. Guards may nest and overlap.
  [[nodiscard]] Background KeepMoving();

 private:
  struct Peer;
  struct Incoming;

  explicit ShmChannel(std::shared_ptr<AbortSignal> abort);

  // Connect's middle: creates this rank's segment and maps those of the other `local` ranks
  // (this host's, this one included) into own_ and peers_. Returns what failed, or "".
  std::string MapSegments(int rank, const std::vector<int>& local, const std::map<int, int>& pids,
                          const std::string& run, Store& store, const ShmChannelOptions& options);

  // These require mutex_ held. Progress, Push and Drain return whether any byte moved;
  // Drain with `stash` also takes messages that have no receive posted yet.
  bool Progress(bool stash);
  bool Push(Peer& peer);
  bool Drain(Peer& peer, bool stash);
  bool Alive(Peer& peer);
  void Ring(Peer& peer);  // wakes `peer` if it sleeps
  // Sleeps on our doorbell for at most a slice (or until `deadline`), unlocking meanwhile.
  void Sleep(std::unique_lock<std::mutex>& lock, std::chrono::steady_clock::time_point deadline);

  void WakeSelf();  // wakes every thread of this process sleeping on our doorbell; no lock
  void Helper();    // the helper thread's loop

  std::chrono::microseconds spin_{0};
  std::shared_ptr<AbortSignal> abort_;
  AbortSignal::Subscription wake_on_abort_;
  std::unique_ptr<ShmSegment> own_;
  std::map<int, std::unique_ptr<Peer>> peers_;  // by world rank

  std::mutex mutex_;  // guards everything below and the state of peers_
  int sleeping_ = 0;  // threads in (or about to enter) their futex wait
  std::condition_variable helper_cv_;
  int helpers_wanted_ = 0;
  bool helper_quit_ = false;
  std::thread helper_;
};

}  // namespace conveyor

#endif  // CONVEYOR_COMM_SHM_CHANNEL_H_
