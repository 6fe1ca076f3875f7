// Sockets of this host around the rendezvous store's address (c10d_world.h): waiting for
// its listener, keeping it on the loopback device, telling whether a port is taken, and the
// beacon by which a rank 0 serving a port announces itself to a second process claiming
// rank 0 on this host.
//
// Thread-safety: the functions are reentrant; a Rank0Beacon is used by one thread.
#ifndef CONVEYOR_COMM_HOST_SOCKETS_H_
#define CONVEYOR_COMM_HOST_SOCKETS_H_

#include <chrono>
#include <string>

#include "conveyor/launch/rendezvous.h"

namespace conveyor {

// libtorch's TCPStore server listens on every interface. For a world on this host alone,
// ties its listening socket on `port` to the loopback device, so that nothing from the
// network reaches it. Returns false when the socket was not found or the option was refused.
bool KeepListenerOnLoopback(int port);

// Returns once something listens at the store's address, or after `timeout` (the store's own
// connect then reports the failure). libtorch's store client, refused, sleeps a whole second
// before it tries again: every rank that starts before rank 0 listens would lose that second
// (most launches of local ranks, measured). Polled every 10 ms instead.
// Returns whether something listens (it tried at least once).
bool AwaitListener(const RendezvousInfo& info, std::chrono::milliseconds timeout);

// Whether `host` names this machine's loopback interface ("localhost", 127.x.y.z, "::1").
bool IsLoopback(const std::string& host);

// Whether `host` (a name or an address) resolves to an address of one of this host's
// interfaces (loopback included). False too when it does not resolve.
bool IsAddressOfThisHost(const std::string& host);

// Whether another socket holds `port` on this host: binding it (as the store's server does,
// address reuse on) fails with EADDRINUSE.
bool PortInUse(int port);

// The host's abstract socket "conveyor-store-PORT", held by the rank 0 serving PORT.
class Rank0Beacon {
 public:
  Rank0Beacon() = default;
  ~Rank0Beacon();
  Rank0Beacon(const Rank0Beacon&) = delete;
  Rank0Beacon& operator=(const Rank0Beacon&) = delete;

  // Takes the beacon of `port`; false when another process holds it (then connecting to it
  // tells that process, whose Knocked() turns true).
  bool Claim(int port);
  // Whether another process knocked since (found the beacon taken). Never blocks.
  bool Knocked();

 private:
  int fd_ = -1;
};

}  // namespace conveyor

#endif  // CONVEYOR_COMM_HOST_SOCKETS_H_
