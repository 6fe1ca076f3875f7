// Runs the ranks of an in-process world (LocalWorld) as threads of this process: the tests'
// ranks, and `--rank-threads` (ranks sharing one GPU, each on its own stream).
#ifndef CONVEYOR_COMM_RANK_THREADS_H_
#define CONVEYOR_COMM_RANK_THREADS_H_

#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "conveyor/comm/comm_error.h"
#include "conveyor/comm/transport.h"
#include "conveyor/common/error.h"

namespace conveyor {

// Runs body(r) for every rank r of `world` on its own thread and joins them all. A rank that
// throws reports the failure on its transport (so its peers stop waiting for it). Once every
// thread has ended, throws a UserError naming the rank that failed first in its own right:
// the lowest rank whose error was not a CommError caused by a peer, else the lowest failing
// rank. `world` must outlive the call.
inline void RunRankThreads(const std::vector<std::unique_ptr<Transport>>& world,
                           const std::function<void(int rank)>& body) {
  const int ranks = static_cast<int>(world.size());
  std::vector<std::string> errors(ranks);
  std::vector<char> by_peer(ranks, 0);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      try {
        body(r);
      } catch (const std::exception& e) {
        errors[r] = ErrorLine(e);
        const auto* comm = dynamic_cast<const CommError*>(&e);
        by_peer[r] = comm != nullptr && comm->caused_by_peer();
        world[r]->ReportFailure(errors[r]);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  int cause = -1;
  for (int r = ranks - 1; r >= 0; --r) {
    if (!errors[r].empty() && (cause < 0 || !by_peer[r] || by_peer[cause])) cause = r;
  }
  CONVEYOR_CHECK(cause < 0) << "rank " << cause << " (thread) failed: " << errors[cause];
}

}  // namespace conveyor

#endif  // CONVEYOR_COMM_RANK_THREADS_H_
