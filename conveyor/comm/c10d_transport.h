// The c10d transport: one process per rank, over PyTorch's c10d.
//
// ConnectC10d meets the other ranks at the TCPStore served by rank 0 (info.master_addr /
// master_port), then creates every communicator eagerly, in the same order on every rank:
// a Gloo process group for CPU tensors and, with use_nccl, an NCCL one for CUDA tensors.
// (Communicators created lazily, in the order traffic happens to arrive, can deadlock.)
// Sub-groups get their own process groups over a prefix of the same store.
//
// Rendezvous: rank 0 serves the store; every rank checks first that what answers at
// master_addr:master_port is a store (another program on the port fails within seconds),
// then announces itself and waits for all the others, up to connect_timeout; on timeout the
// CommError names the ranks that did not arrive.
//
// Failure propagation: every process runs a watcher thread with its own store client that
// polls the key "conveyor/failed". A rank that fails (ReportFailure, a timeout, a lost Gloo
// connection) writes its reason there once; every rank then aborts its pending and later
// waits with CommError "... aborted: <reason>" within about failure_poll_interval. A rank
// killed outright is caught by its peers' Gloo connection errors (which they publish the same
// way) or by the timeout. Losing the store itself (rank 0 died), or the store not answering
// within stall_timeout (rank 0 stalled), aborts every other rank too.
//
// Stalls: every process also runs a heartbeat thread that publishes a counter every
// heartbeat_interval; rank 0 watches them all (HeartbeatMonitor), and a rank whose counter
// has not moved for stall_timeout is published as the failure "rank R stalled: ...". The
// heartbeat thread keeps beating while its rank computes, so long steps raise no alarm; a
// stopped (SIGSTOP), frozen or CPU-starved process stops beating.
//
// Buffers: a Work handle dropped before completion is handed to a drain thread that waits
// for it, so the send is still delivered and its tensor stays alive until then. The buffers
// of operations that failed or were aborted are kept until the world is destroyed, since the
// backend may still hold their addresses.
//
// Shared memory: between two ranks on the same host (same host name, boot id, PID namespace
// and /dev/shm), Send and Recv of CPU tensors in the world transport and in its sub-groups
// (a pipeline inside a dp x tp x pp mesh) go through a ShmChannel (shm_channel.h) instead
// of Gloo: no thread hand-offs (a hop of a small message took 20 us there against 1.4 to 2
// ms over Gloo on a loaded 2-core host), and a send is complete (IsCompleted() true, its
// tensor released) as soon as its bytes are in the ring. A message's tag there carries its
// group (the sub-groups of sub-groups stay on Gloo). AllReduceSum and ReduceScatterSum of
// CPU tensors in a group whose every member is on this host's channel go through it too, as
// rings of messages under tags no Send or Recv can use (a 2-rank all-reduce of 32 KiB took
// about 1.6 ms over Gloo on this 2-core host); the other collectives, CUDA tensors and
// failure propagation stay on c10d. The hosts are compared at connect time; a rank whose
// peer on the channel exits fails its waits on that peer like a lost Gloo connection.
// C10dOptions::shared_memory_p2p = false, or CONVEYOR_SHM=0 in a rank's environment, keeps that
// rank on Gloo (CONVEYOR_SHM_SPIN_US overrides C10dOptions::shm.spin). If setting up shared memory
// fails on any rank (e.g. /dev/shm full), every rank stays on Gloo and rank 0 says why on stderr.
//
// Reduce-scatter: Gloo (in libtorch 1.13) has none, so ReduceScatterSum is a ring of
// point-to-point messages (n - 1 steps; each rank sends one part to the next rank and adds
// its own input to the part it receives from the previous one), bandwidth-optimal: each rank
// sends and receives about (n - 1) / n of one input. Off shared memory its messages travel
// on process groups of their own, which each group connects at its first reduce-scatter
// (every member is there, as for any collective) and uses for nothing else; on it, under
// the collectives' tags. Either way they never meet a caller's Send or Recv. An all-reduce
// through shared memory is that ring followed by a ring all-gather of the sums (every rank
// ends with the same bits).
//
// Limits: Gloo point-to-point Work reports IsCompleted() only once Wait() returned. NCCL
// ignores tags: between two ranks, CUDA messages must be posted in the same order on both
// sides. Group creation waits for the members within the timeout but cannot be aborted early.
// AllGather and Broadcast cannot compare the ranks' shapes and dtypes (a precondition, see
// transport.h). Collectives carry the dtypes the backend supports (Gloo: the floating and
// integer types; not necessarily bool); one it refuses is a failure of the rank.
//
// Shutdown: destroying the world transport drains dropped sends (shared-memory ones too:
// until their bytes are in the ring, bounded by the timeout) and stops the watcher; rank 0
// (which serves the store) then waits, up to the timeout, until every rank has done the same,
// so no rank mistakes a normal exit of rank 0 for a failure.
#ifndef CONVEYOR_COMM_C10D_TRANSPORT_H_
#define CONVEYOR_COMM_C10D_TRANSPORT_H_

#include <memory>

#include "conveyor/comm/c10d_options.h"
#include "conveyor/comm/transport.h"
#include "conveyor/launch/rendezvous.h"

namespace conveyor {

// Connects this process as rank info.rank of info.world_size. Blocks until every rank has
// connected (bounded by the timeout); throws CommError when that fails. Every process of the
// world calls it once.
std::unique_ptr<Transport> ConnectC10d(const RendezvousInfo& info, const C10dOptions& options = {});

}  // namespace conveyor

#endif  // CONVEYOR_COMM_C10D_TRANSPORT_H_
