// Test support: runs the ranks of a LocalWorld as threads and turns their exceptions into
// one error instead of std::terminate.
#ifndef CONVEYOR_COMM_RANK_THREADS_TESTING_H_
#define CONVEYOR_COMM_RANK_THREADS_TESTING_H_

#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "conveyor/comm/transport.h"
#include "conveyor/common/error.h"

namespace conveyor {

// Runs body(r) for every rank r of `world` on its own thread and joins them all. A rank that
// throws reports the failure on its transport (so its peers stop waiting for it) and, once
// every thread has ended, the first failing rank's message is thrown as a UserError naming
// that rank. `world` must outlive the call.
inline void RunRankThreads(const std::vector<std::unique_ptr<Transport>>& world,
                           const std::function<void(int rank)>& body) {
  const int ranks = static_cast<int>(world.size());
  std::vector<std::string> errors(ranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      try {
        body(r);
      } catch (const std::exception& e) {
        errors[r] = e.what();
        world[r]->ReportFailure(e.what());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < ranks; ++r) {
    CONVEYOR_CHECK(errors[r].empty()) << "rank " << r << " (thread) failed: " << errors[r];
  }
}

}  // namespace conveyor

#endif  // CONVEYOR_COMM_RANK_THREADS_TESTING_H_
