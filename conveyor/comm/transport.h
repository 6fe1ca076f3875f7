// Transport: how ranks exchange tensors. The runtime talks only to this interface; it is
// implemented over c10d (c10d_transport.h: one process per rank, Gloo on CPU, NCCL on CUDA)
// and in-process (local_transport.h: ranks are threads).
//
// Point-to-point: Send and Recv post an operation and return at once with a Work handle.
// Messages match by (sender, receiver, tag); messages with the same triple match in posting
// order. Receives may be posted before the matching send exists, and sends may be posted in
// any order of tags. Collectives (AllReduceSum, ReduceScatterSum, AllGather, AllToAll,
// Broadcast, Barrier, NewGroup) block and must be called by every rank of the transport in the same
// order. The traffic of a collective never matches a caller's Send or Recv, whatever their tags (an
// implementation that builds a collective from point-to-point messages keeps those apart).
//
// Buffer lifetime: an implementation keeps every tensor of an operation in flight alive until
// the operation completes, even when the caller drops the Work handle; a dropped send is still
// delivered. The caller must not modify a sent tensor, nor read a receive buffer, before the
// operation's Wait() returned.
//
// Failures never hang: every wait is bounded by TransportOptions::timeout, and a failure on
// one rank (a timeout, a lost connection, or ReportFailure) makes the pending and later waits
// of every rank of the world throw CommError naming the failed rank, within about the
// implementation's failure-detection interval. Once failed, a transport stays failed.
//
// Thread-safety: one Transport is used by one thread at a time (operations are posted in a
// program order that every rank agrees on); ReportFailure may be called from any thread. A
// Work handle is waited on by one thread at a time.
#ifndef CONVEYOR_COMM_TRANSPORT_H_
#define CONVEYOR_COMM_TRANSPORT_H_

#include <ATen/core/Tensor.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "conveyor/comm/comm_error.h"
#include "conveyor/comm/group_ranks.h"

namespace conveyor {

struct TransportOptions {
  // Bound on every blocking wait: Work::Wait() (counted from the call of Wait, not from the
  // posting), a collective, the creation of a group or of the transport itself.
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
  // Match point-to-point messages by (sender, receiver) in posting order alone, as NCCL
  // does, instead of by (sender, receiver, tag). Read by the in-process transport only (to
  // test that a program posts the messages between two ranks in the same order on both
  // sides): a message matched to a receive of another tag fails the receive with a
  // CommError naming both tags. c10d over Gloo always matches by tag.
  bool match_by_order = false;
};

// A pending point-to-point operation.
class Work {
 public:
  virtual ~Work() = default;

  // Blocks until the operation completed: the tensor was handed to the peer (send) or the
  // buffer holds the message (recv). Throws CommError naming this rank, the operation, peer
  // and tag when the operation failed, did not complete within the timeout, or any rank
  // failed. Calling it again after success returns at once; after a failure, throws again.
  virtual void Wait() = 0;

  // True when the operation is known to be complete (never blocks). May stay false until
  // Wait() returned for operations whose backend cannot be polled (Gloo point-to-point).
  virtual bool IsCompleted() = 0;
};

class Transport {
 public:
  // Tags are in [0, kMaxTag].
  static constexpr std::uint32_t kMaxTag = GroupRanks::kMaxTag;

  virtual ~Transport() = default;

  // This rank in this transport's group, in [0, world_size()).
  virtual int rank() const = 0;
  virtual int world_size() const = 0;

  // Posts a send of `tensor` to rank `dst` (!= rank()). A non-contiguous tensor is sent as a
  // contiguous copy. The backend must handle the tensor's device (CPU always).
  virtual std::shared_ptr<Work> Send(at::Tensor tensor, int dst, std::uint32_t tag) = 0;

  // Posts a receive from rank `src` (!= rank()) into `buffer`, which must be contiguous and
  // have the exact shape and dtype of the message (the transport exchanges no metadata).
  virtual std::shared_ptr<Work> Recv(at::Tensor buffer, int src, std::uint32_t tag) = 0;

  // Sums each tensor over all ranks, in place, blocking. Tensors may differ in shape and
  // dtype; every rank passes the same list of shapes and dtypes in the same order.
  virtual void AllReduceSum(std::vector<at::Tensor>& tensors) = 0;

  // Sums `input` over every rank and returns this rank's part of the sum, blocking: elements
  // [counts[0] + ... + counts[rank() - 1], + counts[rank()]) of the elementwise sum of the
  // ranks' inputs, as a new contiguous 1-D tensor of counts[rank()] elements with `input`'s
  // dtype and device, owned by the caller. `input` is not modified and may be non-contiguous.
  // Parts may differ in length, and may be empty. Each rank receives about the size of the
  // other ranks' parts of one input (not the whole sum, as an all-reduce would).
  // Preconditions (UserError naming this rank and the values, before any traffic): `input`
  // is a defined 1-D tensor; counts.size() == world_size(); every count >= 0; the counts sum
  // to input.numel(). Every rank passes the same counts and an input of the same dtype; as
  // for AllGather, only the in-process transport detects a mismatch between ranks.
  virtual at::Tensor ReduceScatterSum(const at::Tensor& input,
                                      const std::vector<int64_t>& counts) = 0;

  // Returns every rank's `local`, blocking: world_size() tensors in rank order (element r is
  // rank r's `local`; element rank() a copy of this rank's), contiguous, with `local`'s dtype
  // and device, owned by the caller (no rank's later changes reach them). `local` may be
  // non-contiguous and is not modified.
  // Precondition: every rank passes a defined tensor of the same shape and dtype. The
  // in-process transport detects a mismatch and fails every rank with a CommError naming the
  // ranks and their shapes; c10d cannot: there, a mismatch may fail, time out, or return
  // garbage.
  virtual std::vector<at::Tensor> AllGather(const at::Tensor& local) = 0;

  // Sends parts of `input` to every rank and returns what every rank sent this one, blocking:
  // the first send_counts[0] rows of `input` (along dimension 0) go to rank 0, the next
  // send_counts[1] to rank 1, and so on (this rank's own part included); the result holds
  // recv_counts[0] rows from rank 0, then recv_counts[1] from rank 1, ..., with `input`'s
  // other dimensions, dtype and device, as a new contiguous tensor owned by the caller. Parts
  // may be empty; `input` may be non-contiguous and is not modified. This is how tokens travel
  // to their experts and back (expert parallelism), each rank's counts its own.
  // Preconditions (UserError naming this rank and the values, before any traffic): `input`
  // is defined with at least one dimension; both counts have one entry per rank, none
  // negative; the send counts sum to input.size(0). Every rank passes inputs of the same
  // trailing shape and dtype, and rank s's send_counts[r] equals rank r's recv_counts[s]:
  // the in-process transport detects a mismatch and fails every rank with a CommError naming
  // the ranks and counts; c10d cannot (a mismatch may fail, time out, or return garbage).
  virtual at::Tensor AllToAll(const at::Tensor& input, const std::vector<int64_t>& send_counts,
                              const std::vector<int64_t>& recv_counts) = 0;

  // Copies rank `root`'s `tensor` into `tensor` on every other rank, in place, blocking (the
  // root's is left as it is). `root` is a rank of this transport, the same on every rank
  // (UserError, naming this rank, when it is outside [0, world_size())). `tensor` may be
  // non-contiguous.
  // Precondition: every rank passes a defined tensor of the same shape and dtype, and the
  // same root; as for AllGather, only the in-process transport detects a mismatch.
  virtual void Broadcast(at::Tensor& tensor, int root) = 0;

  // Returns once every rank has entered Barrier.
  virtual void Barrier() = 0;

  // Creates a sub-group of `ranks` (ranks of this transport; distinct, any order: the
  // position in `ranks` is the rank inside the group). Collective over this transport: every
  // rank calls it, in the same order, with the same `ranks`. Returns the member's transport,
  // or nullptr on ranks outside `ranks`. Sub-groups share the world's failure detection.
  virtual std::unique_ptr<Transport> NewGroup(const std::vector<int>& ranks) = 0;

  // Tells every rank of the world that this rank failed with `message` (call it from the
  // runtime's catch block before rethrowing): their waits throw CommError
  // "... rank R failed: message". Idempotent; never throws.
  virtual void ReportFailure(const std::string& message) noexcept = 0;
};

}  // namespace conveyor

#endif  // CONVEYOR_COMM_TRANSPORT_H_
