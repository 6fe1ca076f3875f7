#include "conveyor/cli/distributed.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <thread>

#include "conveyor/cli/blas_check.h"
#include "conveyor/comm/c10d_transport.h"
#include "conveyor/comm/launcher.h"
#include "conveyor/comm/rendezvous.h"
#include "conveyor/common/error.h"

namespace conveyor::cli {
namespace {

bool EnvAbove(const char* name, int value) {
  const char* text = std::getenv(name);
  return text != nullptr && std::atoi(text) > value;
}

}  // namespace

bool LaunchedAsRank() {
  return std::getenv("RANK") != nullptr ||
         (std::getenv("SLURM_PROCID") != nullptr && EnvAbove("SLURM_NTASKS", 1)) ||
         (std::getenv("OMPI_COMM_WORLD_RANK") != nullptr && EnvAbove("OMPI_COMM_WORLD_SIZE", 1));
}

int RunAsRanks(const std::vector<std::string>& args, const RanksOptions& options,
               const std::function<void(Transport&)>& body) {
  if (!LaunchedAsRank()) {
    CONVEYOR_CHECK(options.nproc >= 1)
        << "the number of ranks must be at least 1, got " << options.nproc;
    std::vector<std::string> argv = {"/proc/self/exe"};
    argv.insert(argv.end(), args.begin(), args.end());
    LaunchOptions launch;
    launch.output = options.output;
    launch.deadline = options.deadline;
    const LaunchResult result = LaunchLocal(options.nproc, argv, launch);
    if (!result.ok()) std::cerr << "conveyor: " << result.Report() << "\n";
    return result.ExitCode();
  }
  const RendezvousInfo info = RendezvousFromEnvironment();
  if (info.rank == 0) WarnAboutBlas();
  // Ranks on one machine share its cores: without OMP_NUM_THREADS, give each its share
  // (oversubscribed intra-op threads slow every hand-off between ranks several fold).
  if (options.threads > 0) {
    at::set_num_threads(options.threads);
  } else if (std::getenv("OMP_NUM_THREADS") == nullptr) {
    const char* local = std::getenv("LOCAL_WORLD_SIZE");
    const int local_ranks = local != nullptr ? std::max(1, std::atoi(local)) : 1;
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    at::set_num_threads(std::max(1, cores / local_ranks));
  }
  C10dOptions c10d;
  c10d.transport.timeout = options.timeout;
  std::unique_ptr<Transport> transport = ConnectC10d(info, c10d);
  try {
    body(*transport);
  } catch (const CommError& e) {
    transport->ReportFailure(e.what());
    std::cerr << "conveyor: rank " << info.rank << ": " << e.what() << "\n";
    return e.caused_by_peer() ? kExitPeerFailed : 1;
  } catch (const std::exception& e) {
    transport->ReportFailure(e.what());
    std::cerr << "conveyor: rank " << info.rank << ": " << e.what() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace conveyor::cli
