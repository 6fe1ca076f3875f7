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
      << flag << " " << nproc << " would start " << nproc
      << " local processes; at most max(64, 8 x " << std::thread::hardware_concurrency()
      << " cores) = " << MaxLocalRanks() << " without --oversubscribe";
}

}  // namespace conveyor
