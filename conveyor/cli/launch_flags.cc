#include "conveyor/cli/launch_flags.h"

#include <algorithm>
#include <thread>

#include "conveyor/cli/run_as_ranks.h"
#include "conveyor/common/error.h"

namespace conveyor {

int MaxLocalRanks() {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(64, 8 * cores);
}

void LaunchFlags::Register(CLI::App* cmd) {
  cmd->add_flag("--oversubscribe", oversubscribe, "allow more local ranks than max(64, 8 x cores)");
  cmd->add_flag("--rank-threads", rank_threads,
                "run the ranks as threads of this process, not processes (ranks sharing one "
                "GPU, each on its own stream; on the CPU processes are faster)");
}

void LaunchFlags::CheckLocalRanks(int64_t nproc, std::string_view flag) const {
  if (oversubscribe || LaunchedAsRank()) return;
  CONVEYOR_CHECK(nproc <= MaxLocalRanks())
      << flag << " " << nproc << " would start " << nproc << " local "
      << (rank_threads ? "rank threads" : "processes") << "; at most max(64, 8 x "
      << std::thread::hardware_concurrency() << " cores) = " << MaxLocalRanks()
      << " without --oversubscribe";
}

void LaunchFlags::CheckThreads(int64_t threads, int64_t ranks) const {
  if (threads <= 0 || oversubscribe || LaunchedAsRank()) return;
  const int64_t cores = std::max(1u, std::thread::hardware_concurrency());
  const int64_t total = threads * ranks;
  CONVEYOR_CHECK(total <= 8 * cores)
      << "--threads " << threads << " x " << ranks << " local ranks = " << total << " threads on "
      << cores << " cores: more than 8 per core, each rank waiting for the "
      << "others' threads; give fewer, or --oversubscribe";
}

}  // namespace conveyor
