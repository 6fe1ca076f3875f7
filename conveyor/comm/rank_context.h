// Who a rank is, resolved once where the ranks start: RunAsRanks (cli/run_as_ranks.h) reads
// the launcher's environment (launch/rendezvous.h) and resolves the device there, and hands
// this to the rank's body; the model and the trainer read it, never the environment.
//
// Ownership: `world` is borrowed; it must outlive whatever the context is given to.
#ifndef CONVEYOR_COMM_RANK_CONTEXT_H_
#define CONVEYOR_COMM_RANK_CONTEXT_H_

#include <c10/core/Device.h>

#include <string>

#include "conveyor/comm/transport.h"
#include "conveyor/common/startup_breakdown.h"
#include "conveyor/device/compute_device.h"

namespace conveyor {

struct RankContext {
  Transport* world = nullptr;  // every rank of the run; null for a lone rank without one
  int rank = 0;                // in the world
  int local_rank = 0;          // among the ranks of its machine (threads: the rank)
  c10::Device device = c10::Device(c10::DeviceType::CPU);  // where it computes
  // Its intra-op threads and why, one line (launch/thread_share.h's ThreadShare::line); ""
  // where nothing chose them (a context made by hand).
  std::string threads;
  // Its start-up so far: where the ranks start, the process, device and rendezvous phases;
  // the run that takes the context ends the others.
  StartupBreakdown startup;
};

// A rank of this process: the rank of `world` (an in-process world: its ranks are threads;
// null: the only rank), whose local rank is its world rank, computing on `kind` resolved
// (ComputeDevice: UserError naming the rank when CUDA is asked for and there is none).
// Nothing is warmed up or timed (startup stays zero).
RankContext InProcessRank(Transport* world, DeviceKind kind);

}  // namespace conveyor

#endif  // CONVEYOR_COMM_RANK_CONTEXT_H_
