#include "conveyor/launch/thread_share.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "conveyor/common/error.h"

namespace conveyor {
namespace {

bool HasCore(const std::vector<uint64_t>& mask, size_t core) {
  return core / 64 < mask.size() && (mask[core / 64] >> (core % 64)) & 1;
}

std::string Count(int n, const char* what) {
  return std::to_string(n) + " " + what + (n == 1 ? "" : "s");
}

// The threads OMP_NUM_THREADS gives a rank's intra-op pool: its first number ("4" of
// "4,2"); 0 when it does not start with one.
int OmpThreads(const std::string& value) {
  int threads = 0;
  for (char c : value) {
    if (c < '0' || c > '9' || threads > 1 << 20) break;
    threads = threads * 10 + (c - '0');
  }
  return threads;
}

}  // namespace

ThreadShare ShareCores(const ThreadShareInput& input) {
  CONVEYOR_ASSERT(input.rank >= 0 && input.rank < static_cast<int>(input.world.size()))
      << "rank " << input.rank << " of " << input.world.size();
  const RankCores& self = input.world[input.rank];
  ThreadShare share;
  // The ranks on this machine, and how many of them may run on each of this rank's cores.
  int seen = 0;
  std::vector<int> users(self.mask.size() * 64, 0);
  for (size_t r = 0; r < input.world.size(); ++r) {
    const RankCores& other = input.world[r];
    if (other.machine != self.machine) continue;
    ++seen;
    if (static_cast<int>(r) < input.rank) share.first_on_machine = false;
    for (size_t core = 0; core < users.size(); ++core) {
      users[core] += HasCore(self.mask, core) && HasCore(other.mask, core);
    }
  }
  const int local = std::max(seen, input.launcher_local);
  const double unseen = static_cast<double>(local) / seen;  // ranks the reports missed
  int cores = 0, most_users = 0;
  double fair = 0;  // this rank's share of its cores
  for (size_t core = 0; core < users.size(); ++core) {
    if (users[core] == 0) continue;
    ++cores;
    most_users = std::max(most_users, users[core]);
    fair += 1 / (users[core] * unseen);
  }
  CONVEYOR_ASSERT(cores > 0) << "rank " << input.rank << " reported no core";
  const int fair_threads = std::max(1, static_cast<int>(std::floor(fair + 1e-9)));

  const std::string source =
      input.launcher_local >= seen ? input.launcher_variable : "found when the ranks met";
  const std::string ranks_here = Count(local, "rank") + " on this machine (" + source + ")";
  const bool same_cores = most_users == seen && std::all_of(users.begin(), users.end(), [&](int u) {
                            return u == 0 || u == seen;
                          });
  int chosen = 0;
  std::string chosen_by;
  if (input.threads_flag > 0) {
    share.threads = chosen = input.threads_flag;
    chosen_by = "--threads " + std::to_string(chosen);
    share.line = Count(chosen, "intra-op thread") + " a rank (" + chosen_by + "); " + ranks_here;
  } else if (!input.omp_num_threads.empty()) {
    chosen = OmpThreads(input.omp_num_threads);
    chosen_by = "OMP_NUM_THREADS=" + input.omp_num_threads;
    share.line = "intra-op threads as " + chosen_by + " says; " + ranks_here;
  } else {
    share.threads = fair_threads;
    share.line = Count(fair_threads, "intra-op thread") + " a rank: " + ranks_here;
    if (same_cores) {
      share.line += (local == 1 ? " may run on " : " share the ") + Count(cores, "core") +
                    (local == 1 ? "" : " they may run on");
    } else {
      const int others = static_cast<int>(std::ceil(most_users * unseen - 1e-9)) - 1;
      share.line +=
          "; rank " + std::to_string(input.rank) + " may run on " + Count(cores, "core") +
          (others == 0 ? " of its own" : ", shared with up to " + Count(others, "other rank"));
    }
    if (fair < 1 - 1e-9) share.line += ": more ranks than cores, which they take in turns";
  }
  if (chosen > 1 && chosen > fair + 1e-9) {
    const int sharers = std::max(1, static_cast<int>(std::lround(cores / fair)));
    share.warning = chosen_by + " with " + Count(sharers, "rank") + " on " + Count(cores, "core") +
                    ": " + std::to_string(chosen * sharers) + " threads where " +
                    std::to_string(cores) +
                    " run at once, each rank waiting for the others' threads (without it each "
                    "rank takes its share: " +
                    Count(fair_threads, "thread") + ")";
  }
  return share;
}

}  // namespace conveyor
