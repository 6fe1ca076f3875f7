#include "conveyor/cli/run_as_ranks.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <mutex>
#include <sstream>
#include <utility>
#include <vector>

#include "conveyor/cli/blas_check.h"
#include "conveyor/comm/c10d_transport.h"
#include "conveyor/comm/heartbeat_monitor.h"
#include "conveyor/comm/local_transport.h"
#include "conveyor/comm/rank_threads.h"
#include "conveyor/common/error.h"
#include "conveyor/common/process_stats.h"
#include "conveyor/device/compute_device.h"
#include "conveyor/launch/interrupt_watcher.h"
#include "conveyor/launch/launcher.h"
#include "conveyor/launch/rendezvous.h"
#include "conveyor/launch/thread_share.h"

namespace conveyor {
namespace {

// This process's machine and the cores it may run on.
RankCores ThisProcessCores() { return RankCores{MachineId(), AffinityMask()}; }

// Every rank's machine and cores, gathered over `world` (collective): one row of 64-bit
// words a rank, the machine and then the mask.
std::vector<RankCores> GatherRankCores(Transport& world) {
  const RankCores mine = ThisProcessCores();
  std::vector<int64_t> row = {static_cast<int64_t>(mine.machine)};
  row.insert(row.end(), mine.mask.begin(), mine.mask.end());
  std::vector<RankCores> everyone;
  for (const at::Tensor& got : world.AllGather(at::tensor(row, at::kLong))) {
    const int64_t* words = got.data_ptr<int64_t>();
    everyone.push_back(RankCores{static_cast<uint64_t>(words[0]),
                                 std::vector<uint64_t>(words + 1, words + got.numel())});
  }
  return everyone;
}

// Ranks on one machine share its cores (oversubscribed intra-op threads slow every hand-off
// between ranks several fold): sets the calling thread's intra-op threads as
// launch/thread_share.h chooses, warns (the machine's first rank) when the user's choice
// oversubscribes the cores, and returns the line saying what was chosen and why.
std::string ShareCoresAmongRanks(const RanksOptions& options, ThreadShareInput input) {
  input.threads_flag = options.threads;
  if (const char* omp = std::getenv("OMP_NUM_THREADS")) input.omp_num_threads = omp;
  const ThreadShare share = ShareCores(input);
  if (share.threads > 0) at::set_num_threads(share.threads);
  if (!share.warning.empty() && share.first_on_machine) {
    std::cerr << "conveyor: warning: rank " << input.rank << ": " << share.warning << "\n";
  }
  return share.line;
}

// RanksOptions::as_threads. Errors are printed as "conveyor: rank R (thread) failed: ...".
int RunAsThreads(const RanksOptions& options, const std::function<void(const RankContext&)>& body) {
  CONVEYOR_CHECK(!LaunchedAsRank())
      << "--rank-threads runs every rank in this process; under a launcher (RANK is set), "
         "start it without --rank-threads";
  CONVEYOR_CHECK(options.nproc >= 1)
      << "the number of ranks must be at least 1, got " << options.nproc;
  StartupBreakdown startup;
  startup.End(&StartupBreakdown::process_s);
  WarnAboutBlas();
  TransportOptions transport;
  transport.timeout = options.timeout;
  const auto world = LocalWorld(options.nproc, transport);
  startup.End(&StartupBreakdown::rendezvous_s);
  // The first SIGINT / SIGTERM aborts every rank's communication; the second exits at once.
  std::atomic<int> interrupted{0};
  InterruptWatcher watcher([&](int signal, int count) {
    if (count > 1) _exit(128 + signal);
    interrupted.store(signal);
    const std::string why = std::string("interrupted by SIG") + sigabbrev_np(signal);
    for (const auto& rank : world) rank->ReportFailure(why);
  });
  try {
    ThreadShareInput threads;
    threads.world.assign(options.nproc, ThisProcessCores());
    threads.launcher_local = options.nproc;
    threads.launcher_variable = "--rank-threads";
    RunRankThreads(world, [&](int rank) {
      RankContext context = InProcessRank(world[rank].get(), options.device);
      context.startup = startup;
      ThreadShareInput mine = threads;
      mine.rank = rank;
      // Per thread: OpenMP's count is per thread.
      context.threads = ShareCoresAmongRanks(options, std::move(mine));
      WarmUpDevice(context.device);  // after the thread's intra-op threads are set
      context.startup.End(&StartupBreakdown::device_s);
      body(context);
    });
  } catch (const std::exception& e) {
    if (const int signal = interrupted.load()) {
      std::cerr << "conveyor: interrupted by SIG" << sigabbrev_np(signal)
                << ": every rank stopped at its next wait\n";
      return 128 + signal;
    }
    std::cerr << "conveyor: " << ErrorLine(e) << "\n";
    return 1;
  }
  return 0;
}

}  // namespace

int RunAsRanks(const std::vector<std::string>& args, const RanksOptions& options,
               const std::function<void(const RankContext&)>& body) {
  if (options.as_threads) return RunAsThreads(options, body);
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
  RankContext context;
  context.startup.End(&StartupBreakdown::process_s);
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
  C10dOptions c10d;
  c10d.transport.timeout = options.timeout;
  c10d.connect_timeout = options.timeout;
  c10d.settings = options.settings;
  // A silent rank is declared stalled within half the timeout (3 s at least, 20 s at most):
  // before any wait for it times out, so the stalled rank is blamed, not one waiting for it.
  c10d.stall_timeout =
      std::clamp(options.timeout / 2, std::chrono::milliseconds(3000), c10d.stall_timeout);
  // The error goes once to the launcher, which prints it; under other launchers, to stderr.
  auto report = [&](const std::string& what) {
    const bool named = what.starts_with(self + ":") || what.starts_with(self + " ") ||
                       what.starts_with(self + ",");
    const std::string message = named ? what : self + ": " + what;
    if (!ReportToLauncher(message)) std::cerr << "conveyor: " << message << "\n";
  };
  std::unique_ptr<Transport> transport;
  context.rank = info.rank;
  context.local_rank = info.local_rank;
  try {
    context.device = ComputeDevice(options.device, info.rank, info.local_rank);
    if (context.device.is_cuda()) {
      c10::impl::VirtualGuardImpl(context.device.type()).setDevice(context.device);
      c10d.use_nccl = true;
    }
    WarmUpDevice(context.device);  // the GPU's context before NCCL's
    context.startup.End(&StartupBreakdown::device_s);
    transport = ConnectC10d(info, c10d);
    context.world = transport.get();
    ThreadShareInput threads;
    threads.launcher_local = info.local_world_size;
    threads.launcher_variable = info.local_world_size_variable;
    threads.world = GatherRankCores(*transport);
    threads.rank = info.rank;
    context.threads = ShareCoresAmongRanks(options, std::move(threads));
    context.startup.End(&StartupBreakdown::rendezvous_s);
  } catch (const std::exception& e) {
    report(ErrorLine(e));
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
    body(context);
  } catch (const std::exception& e) {
    transport->ReportFailure(ErrorLine(e));
    if (const int signal = interruption()) return 128 + signal;
    const auto* comm = dynamic_cast<const CommError*>(&e);
    report(ErrorLine(e));
    if (comm == nullptr || !comm->caused_by_peer()) return 1;
    return BlamesStallOf(e.what(), info.rank) ? kExitBlamed : kExitPeerFailed;
  }
  if (const int signal = interruption()) return 128 + signal;
  return 0;
}

}  // namespace conveyor
