// Reaching the rendezvous store of a world (c10d_world.h): libtorch's TCPStore, served by
// rank 0 (or by conveyor's launcher) and connected to by every rank, with the failures of
// getting there said in one line each: rank 0 not started, the port taken, another program
// listening there, MASTER_ADDR not this machine's where rank 0 serves.
//
// Thread-safety: the functions are reentrant.
#ifndef CONVEYOR_COMM_STORE_CONNECTION_H_
#define CONVEYOR_COMM_STORE_CONNECTION_H_

#include <chrono>
#include <string>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "conveyor/launch/rendezvous.h"

namespace conveyor {

// Whether this rank serves the world's store: rank 0, unless the launcher serves it.
bool ServesStore(const RendezvousInfo& info);

// "5 s", "2.5 s".
std::string Seconds(std::chrono::milliseconds duration);

// A store client (and, with `serve`, the server), seeing only the keys under
// info.store_prefix. The client's requests wait up to `timeout` for an answer once a wait()
// has set that bound on its socket. A server for a loopback MASTER_ADDR listens on loopback
// only (KeepListenerOnLoopback; a warning when that fails).
c10::intrusive_ptr<c10d::Store> ConnectStore(const RendezvousInfo& info, bool serve,
                                             std::chrono::milliseconds timeout);

// The world's store, proven to answer: connects (serving it when this rank does) and writes
// and reads back `probe_key`. torch 2.x store clients exchange messages in their constructor
// without any bound, so the work runs on a thread that is abandoned when what listens never
// answers; that thread ends when the peer closes the connection or the process exits.
// Throws CommError naming `who` ("rank 1 of 2"), `where` ("127.0.0.1:29500") and the cause.
c10::intrusive_ptr<c10d::Store> ConnectAnswering(const RendezvousInfo& info,
                                                 std::chrono::milliseconds connect_timeout,
                                                 const std::string& who, const std::string& where,
                                                 const std::string& probe_key);

}  // namespace conveyor

#endif  // CONVEYOR_COMM_STORE_CONNECTION_H_
