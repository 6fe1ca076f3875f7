// Running a command as N ranks: SPMD, the way torchrun does it.
//
// When the environment names a rank (LaunchedAsRank(), launch/rendezvous.h), this process
// checks that the world has `nproc` ranks, connects over c10d as that rank (the rendezvous
// bounded by `timeout`) and runs `body`. Otherwise it launches `nproc` copies of its own
// command line on 127.0.0.1 and waits for them; a rank that fails or stalls stops the others
// and the launcher prints the error once, then a one-line summary.
//
// With `as_threads` (--rank-threads), the `nproc` ranks run instead as threads of this
// process over the in-process transport (comm/local_transport.h): how ranks share one GPU,
// each on a stream of its own (NCCL refuses two processes on one GPU). Not under a launcher.
//
// Stopping: the first SIGINT or SIGTERM a rank receives (the launcher forwards its own) is
// published as that rank's failure, so every rank abandons its step at its next wait
// between ranks; whatever it is writing at that moment is finished first. The rank then
// exits with 128 + the signal. A second signal exits at once.
#ifndef CONVEYOR_CLI_RUN_AS_RANKS_H_
#define CONVEYOR_CLI_RUN_AS_RANKS_H_

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "conveyor/comm/rank_context.h"
#include "conveyor/comm/transport.h"
#include "conveyor/launch/launcher.h"
#include "conveyor/launch/rank_settings.h"
#include "conveyor/launch/rendezvous.h"
#include "conveyor/train/train_config.h"

namespace conveyor {

struct RanksOptions {
  int nproc = 1;  // ranks to launch when not launched
  // Under another launcher the world must have nproc ranks (named by `ranks_flag` in the
  // error), unless `any_world`: then the body checks the world size itself.
  std::string ranks_flag = "--pp";
  bool any_world = false;
  std::chrono::milliseconds timeout{std::chrono::minutes(2)};  // every wait between ranks
  std::chrono::milliseconds deadline{0};                       // whole run when launching; 0 = none
  LaunchOptions::Output output = LaunchOptions::Output::kRank0Only;
  // Intra-op threads of each rank: > 0 sets them; 0 leaves OMP_NUM_THREADS in charge, or
  // without it gives each rank its share of the cores of its machine, found when the ranks
  // meet (launch/thread_share.h); the context's `threads` says what was chosen.
  int threads = 0;
  // Where the ranks compute (compute_device.h): when it resolves to CUDA, each rank makes its
  // GPU the current device before connecting and CUDA tensors travel over NCCL.
  DeviceKind device = DeviceKind::kCpu;
  bool as_threads = false;  // ranks as threads of this process (see the top)
  // What every rank must agree on, compared when they meet (C10dOptions::settings): a rank
  // started with other flags stops every rank before the body runs, naming the difference.
  RankSettings settings;
};

// Returns the process exit code: 0 when every rank succeeded. `args` is this process's
// command line without argv[0]. Rank 0 warns once when libtorch runs on a slow BLAS (blas_check.h).
// `body` gets the rank's context (rank_context.h): its transport, rank, local rank and
// device, resolved here once. In a rank, an exception from `body` is reported to every
// rank and to the launcher (under another launcher: printed as "conveyor: rank R: ..."),
// and turned into exit code 1, or kExitPeerFailed when another rank failed first, or
// kExitBlamed when that failure is this rank's own stall.
int RunAsRanks(const std::vector<std::string>& args, const RanksOptions& options,
               const std::function<void(const RankContext&)>& body);

}  // namespace conveyor

#endif  // CONVEYOR_CLI_RUN_AS_RANKS_H_
