// The in-process transport: the ranks of one world are threads of this process.
//
// Used by tests and by one process that drives several devices. Send copies the tensor into
// the receiver's mailbox (or straight into an already posted receive buffer), so a send is
// complete when Send returns and its tensor may be reused at once; a receive completes when
// its message arrived. Collectives meet in shared state, where the ranks' operands are
// compared: ranks that disagree on the operation, pass all-gather, reduce-scatter or
// broadcast operands of different shapes or dtypes, name different broadcast roots or pass
// different reduce-scatter counts fail the collective on every rank with a CommError naming
// the ranks and what differs. In a reduce-scatter each rank sums only its own part of the
// ranks' operands. Every wait is bounded by the options' timeout; a timeout, a mismatched
// message or collective, or ReportFailure on any rank makes every pending and later wait of
// the world throw CommError (see transport.h).
//
// Tensors may live on any device; receive buffers, all-reduce and broadcast operands are
// written with at::Tensor::copy_ and all-gather and reduce-scatter results made on the
// operand's device, so a message may cross devices.
//
// CUDA tensors (ranks as threads sharing GPUs, each computing on its own current stream):
// a message is ordered by events, never by the host waiting. A receive marks its buffer on
// the receiver's stream when posted; the thread that delivers (the sender's, or the
// receiver's for a message that arrived first, copied on the sender's stream) makes its
// stream wait for that mark, copies, and marks the copy; Wait() makes the receiver's stream
// wait for it. Memory crossing streams is recorded with the caching allocator. Collectives
// are rarer: they synchronise the calling thread's stream around its part (see Meet).
#ifndef CONVEYOR_COMM_LOCAL_TRANSPORT_H_
#define CONVEYOR_COMM_LOCAL_TRANSPORT_H_

#include <memory>
#include <vector>

#include "conveyor/comm/transport.h"

namespace conveyor {

// Creates the `n` transports of one world; transport i has rank i and is meant to be used by
// one thread. The transports (and their sub-groups) may be destroyed in any order.
std::vector<std::unique_ptr<Transport>> LocalWorld(int n, const TransportOptions& options = {});

}  // namespace conveyor

#endif  // CONVEYOR_COMM_LOCAL_TRANSPORT_H_
