#include "conveyor/cli/distributed.h"

#include <ATen/Parallel.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <mutex>
#include <sstream>
#include <thread>

#include "conveyor/cli/blas_check.h"
#include "conveyor/comm/c10d_transport.h"
#include "conveyor/common/env.h"
#include "conveyor/common/error.h"
#include "conveyor/launch/interrupt_watcher.h"
#include "conveyor/launch/launcher.h"
#include "conveyor/launch/rendezvous.h"
#include "conveyor/train/compute_device.h"

namespace conveyor {

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
    if (!result.ok()) {
      std::istringstream report(result.Report());
      for (std::string line; std::getline(report, line);) std::cerr << "conveyor: " << line << "\n";
    }
    return result.ExitCode();
  }
  const RendezvousInfo info = RendezvousFromEnvironment();
  if (!options.any_world) {
    CheckWorldSize(info, options.nproc, options.ranks_flag + " " + std::to_string(options.nproc));
  }
  const std::string self = "rank " + std::to_string(info.rank);
  // SIGINT / SIGTERM: the first aborts every rank's communication (the step in progress is
  // abandoned at its next wait, files being written are finished), the second exits at once.
  std::mutex mutex;
  Transport* live = nullptr;  // guarded by mutex; set while `body` runs
  int interrupted = 0;        // guarded by mutex
  InterruptWatcher watcher([&](int signal, int count) {
    std::lock_guard<std::mutex> lock(mutex);
    if (count > 1 || live == nullptr) _exit(128 + signal);
    interrupted = signal;
    live->ReportFailure(self + " was interrupted by SIG" + sigabbrev_np(signal));
  });
  if (info.rank == 0) WarnAboutBlas();
  // Ranks on one machine share its cores: without OMP_NUM_THREADS, give each its share
  // (oversubscribed intra-op threads slow every hand-off between ranks several fold).
  if (options.threads > 0) {
    at::set_num_threads(options.threads);
  } else if (std::getenv("OMP_NUM_THREADS") == nullptr) {
    const int local_ranks = static_cast<int>(EnvInt("LOCAL_WORLD_SIZE", 1, 1, 1 << 24));
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    at::set_num_threads(std::max(1, cores / local_ranks));
  }
  C10dOptions c10d;
  c10d.transport.timeout = options.timeout;
  c10d.connect_timeout = options.timeout;
  // The error goes once to the launcher, which prints it; under other launchers, to stderr.
  auto report = [&](const std::string& what) {
    const bool named = what.starts_with(self + ":") || what.starts_with(self + " ") ||
                       what.starts_with(self + ",");
    const std::string message = named ? what : self + ": " + what;
    if (!ReportToLauncher(message)) std::cerr << "conveyor: " << message << "\n";
  };
  std::unique_ptr<Transport> transport;
  try {
    if (UsesCuda(options.device)) {
      const c10::Device device = ComputeDevice(options.device, info.rank, info.local_rank);
      c10::impl::VirtualGuardImpl(device.type()).setDevice(device);
      c10d.use_nccl = true;
    }
    transport = ConnectC10d(info, c10d);
  } catch (const std::exception& e) {
    report(e.what());
    return 1;
  }
  auto interruption = [&]() {
    std::lock_guard<std::mutex> lock(mutex);
    live = nullptr;
    return interrupted;
  };
  try {
    {
      std::lock_guard<std::mutex> lock(mutex);
      live = transport.get();
    }
    body(*transport);
  } catch (const std::exception& e) {
    transport->ReportFailure(e.what());
    if (const int signal = interruption()) return 128 + signal;
    const auto* comm = dynamic_cast<const CommError*>(&e);
    report(e.what());
    return comm != nullptr && comm->caused_by_peer() ? kExitPeerFailed : 1;
  }
  if (const int signal = interruption()) return 128 + signal;
  return 0;
}

}  // namespace conveyor
