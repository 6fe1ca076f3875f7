// C10dWorld: the per-process state shared by a c10d world transport and its sub-groups: the
// rendezvous store, failure detection (AbortSignal + store watcher + heartbeat), the drain thread
// for dropped operations, the shared-memory channel to the ranks on this host (if any), and the one
// function that waits on a c10d operation. Private to c10d_transport.cc; the only header of
// conveyor that includes c10d.
//
// Thread-safety: every member may be called from any thread, except ConnectShm (once, by the
// world transport's constructor, before any operation).
#ifndef CONVEYOR_COMM_C10D_WORLD_H_
#define CONVEYOR_COMM_C10D_WORLD_H_

#include <ATen/core/Tensor.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "conveyor/comm/abort_signal.h"
#include "conveyor/comm/c10d_options.h"
#include "conveyor/comm/host_sockets.h"
#include "conveyor/comm/shm_channel.h"
#include "conveyor/launch/rendezvous.h"

namespace conveyor {

// A c10d operation with everything it needs alive: its tensor and the process group that
// runs it (held as a type-erased owner so that the group outlives the operation).
struct C10dOp {
  c10::intrusive_ptr<c10d::Work> work;
  at::Tensor tensor;
  std::shared_ptr<void> owner;
  std::string what;       // "rank 0: send to rank 1 (tag 3)"
  bool pollable = false;  // has a future (collectives, NCCL); false for Gloo point-to-point
};

class C10dWorld {
 public:
  // Connects to the store (rank 0 serves it), checks that it is one, claims this rank and
  // publishes its settings, waits until every rank has arrived (all bounded by
  // options.connect_timeout; CommError names the ranks missing), compares every rank's
  // settings, then starts the watcher and the heartbeat. Two processes claiming one rank, or
  // ranks whose settings differ (options.settings, the world size, the version), stop every
  // rank here with one CommError naming them (launch/rank_settings.h).
  C10dWorld(const RendezvousInfo& info, const C10dOptions& options);
  ~C10dWorld();  // drains dropped operations, stops the threads

  const RendezvousInfo& info() const { return info_; }
  const C10dOptions& options() const { return options_; }
  const c10::intrusive_ptr<c10d::Store>& store() const { return store_; }
  AbortSignal& abort() { return *abort_; }

  // Sets up the shared-memory channel (collective over the world's store; see
  // ShmChannel::Connect), unless options().shared_memory_p2p is false or the environment has
  // CONVEYOR_SHM=0 (CONVEYOR_SHM_SPIN_US overrides options().shm.spin, for measurements).
  // Throws CommError when a rank does not take part in time.
  void ConnectShm();
  // The channel to the ranks on this host; nullptr when there is none.
  const std::shared_ptr<ShmChannel>& shm() const { return shm_; }
  // While the returned guard lives, the shared-memory channel progresses on its helper
  // thread: for every blocking call outside it (a c10d operation, creating a process group),
  // so that a large shared-memory message cannot deadlock against it.
  ShmChannel::Background KeepShmMoving();

  // Publishes `reason` to every rank unless another failure was published first, and aborts
  // this process's waits with whichever came first. Never throws.
  void Fail(const std::string& reason) noexcept;

  // Fail(failure), then throws CommError: `failure` itself when it was the world's first
  // failure, else "<what> aborted: <first failure> (here: <failure>)".
  [[noreturn]] void Raise(const std::string& what, const std::string& failure);

  // Waits for `op` (timeout counted from now). On failure publishes and throws CommError; on
  // abort throws CommError "<what> aborted: <reason>". In both cases `op` is kept alive
  // until the world is destroyed.
  void Wait(const C10dOp& op);

  // Takes over an operation whose handle was dropped before completion: waits for it on the
  // drain thread.
  void Adopt(C10dOp op);

  // The exit protocol (see c10d_transport.h); called once by the world transport.
  void Shutdown();

 private:
  // Waits for a pollable op's future; false on timeout or abort.
  bool AwaitFuture(const C10dOp& op);
  // Waits until every rank has published its first heartbeat, up to `deadline`; throws
  // the reason when a rank published a failure or another process claimed this rank.
  void AwaitArrivals(std::chrono::steady_clock::time_point deadline);
  // Throws CommError when the rendezvous failed elsewhere (a published failure) or another
  // process claims this rank.
  void CheckRendezvous();
  // Compares every rank's published settings (after AwaitArrivals): a difference is
  // published as the world's failure and thrown.
  void CompareSettings();
  // The watcher thread: polls the store for failures and fires timers.
  void Watch();
  // The heartbeat thread: publishes this rank's heartbeat; on rank 0 also watches everyone's.
  void Beat();
  // On rank 0 after it published `stalled`'s stall, under a launcher other than conveyor's:
  // keeps the store up for at most 5 s more in case that rank runs again, so that it reads
  // why the run stopped (and exits as the one blamed) instead of finding the store gone.
  void AwaitBlamedRank(int stalled);
  // Runs `fire` on the watcher thread after `delay`, unless cancelled first. After
  // CancelTimer returns, `fire` is not running and never runs.
  std::uint64_t AddTimer(std::chrono::milliseconds delay, std::function<void()> fire);
  void CancelTimer(std::uint64_t id);
  void Drain();
  void Keep(const C10dOp& op);

  RendezvousInfo info_;
  C10dOptions options_;
  std::string self_;    // "rank 3"
  Rank0Beacon beacon_;  // the serving rank 0's announcement on this host
  c10::intrusive_ptr<c10d::Store> store_;
  std::string where_;                                // "127.0.0.1:29500"
  c10::intrusive_ptr<c10d::Store> watch_store_;      // the watcher's own connection (and Fail's)
  std::mutex watch_store_mutex_;                     // one request at a time on watch_store_
  c10::intrusive_ptr<c10d::Store> heartbeat_store_;  // the heartbeat thread's own connection
  std::shared_ptr<AbortSignal> abort_;
  std::shared_ptr<ShmChannel> shm_;

  std::mutex mutex_;
  std::condition_variable cv_;
  bool stopping_ = false;
  bool beating_stopped_ = false;
  int stalled_rank_ = -1;  // the rank rank 0 published as stalled; guarded by mutex_
  std::deque<C10dOp> adopted_;
  std::deque<C10dOp> kept_;  // failed or aborted operations
  std::map<std::uint64_t, std::pair<std::chrono::steady_clock::time_point, std::function<void()>>>
      timers_;
  std::uint64_t next_timer_ = 1;
  std::thread watcher_;
  std::thread drainer_;  // started on the first Adopt
  std::thread beater_;
};

}  // namespace conveyor

#endif  // CONVEYOR_COMM_C10D_WORLD_H_
