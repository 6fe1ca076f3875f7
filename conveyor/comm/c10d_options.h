// How a c10d world connects and watches its ranks (c10d_transport.h's ConnectC10d; shared with
// the world's state in c10d_world.h). Plain values.
#ifndef CONVEYOR_COMM_C10D_OPTIONS_H_
#define CONVEYOR_COMM_C10D_OPTIONS_H_

#include <chrono>

#include "conveyor/comm/shm_channel.h"
#include "conveyor/launch/rank_settings.h"
#include "conveyor/comm/transport.h"

namespace conveyor {

struct C10dOptions {
  TransportOptions transport;
  // Bound on meeting the other ranks at the store, which may start much later than this one.
  std::chrono::milliseconds connect_timeout{std::chrono::minutes(5)};
  std::chrono::milliseconds failure_poll_interval{100};
  // Heartbeats: how often each rank beats, and how long a silent rank has before it is
  // declared stalled (also the bound on any store request of the watcher and heartbeat).
  std::chrono::milliseconds heartbeat_interval{1000};
  std::chrono::milliseconds stall_timeout{20000};
  // Also create an NCCL process group for CUDA tensors. Requires a libtorch built with
  // NCCL and the current CUDA device set to this rank's GPU before connecting.
  bool use_nccl = false;
  // Point-to-point through shared memory between ranks on the same host (see above).
  bool shared_memory_p2p = true;
  ShmChannelOptions shm;
  // What every rank must agree on (launch/rank_settings.h): compared at rendezvous with the
  // world size and the binary's version, which the world adds.
  RankSettings settings;
};

}  // namespace conveyor

#endif  // CONVEYOR_COMM_C10D_OPTIONS_H_
