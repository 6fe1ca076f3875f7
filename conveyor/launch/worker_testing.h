// Test support: tests that run real processes. A test launches its own test binary as N ranks
// (LaunchLocal) running one worker, a function declared with CONVEYOR_WORKER, and then checks
// which ranks reached the end of it.
//
// Proof that a worker ran: a launched rank whose worker never ran exits 0 all the same (a
// gtest filter that matches nothing passes), so the exit codes prove nothing. Instead each
// rank writes a file into a folder the launching test gives it (an environment variable)
// when its worker returned with no failure, or when the worker calls MarkWorkerFinished
// itself (before leaving through _exit); LaunchWorker reads back which ranks did.
//
// Registration: a worker becomes a gtest test (suite "Worker") only in a process launched to
// run it, so test listings (ctest's discovery) never show workers as tests, skipped or not.
//
//   CONVEYOR_WORKER(Exchange) {
//     std::unique_ptr<Transport> t = ConnectC10d(RendezvousFromEnvironment(), options);
//     EXPECT_EQ(...);
//   }
//   TEST(C10dTransportTest, Exchange) {
//     WorkerRun run = LaunchWorker(4, "Exchange", options);
//     EXPECT_TRUE(run.launch.ok()) << run.launch.Report();
//     EXPECT_THAT(run.finished, ElementsAre(0, 1, 2, 3));
//   }
//
// Thread-safety: as LaunchLocal (one launch at a time per process).
#ifndef CONVEYOR_LAUNCH_WORKER_TESTING_H_
#define CONVEYOR_LAUNCH_WORKER_TESTING_H_

#include <string>
#include <vector>

#include "conveyor/launch/launcher.h"

namespace conveyor {

struct WorkerRun {
  LaunchResult launch;
  std::vector<int> finished;  // the ranks that finished the worker, ascending
};

// Runs worker `name` as `nproc` ranks of this test binary under `options` (its extra_env is
// passed on; options.deadline must be set, so a launch is bounded). Returns the launch's
// result and the ranks that finished.
WorkerRun LaunchWorker(int nproc, const std::string& name, LaunchOptions options);

// In a launched worker: records that this rank finished. Called for every worker that
// returns without a failure; a worker that leaves through _exit calls it first itself.
// Adds a gtest failure when the record cannot be written.
void MarkWorkerFinished();

// Registers `body` as worker `name` when this process was launched to run it; returns whether
// it was. For CONVEYOR_WORKER.
bool RegisterWorker(const char* name, void (*body)(), const char* file, int line);

}  // namespace conveyor

// Defines worker NAME (an identifier); the body follows, as for TEST.
#define CONVEYOR_WORKER(NAME)                                                        \
  void NAME##Worker();                                                               \
  [[maybe_unused]] static const bool NAME##_worker_registered =                      \
      ::conveyor::RegisterWorker(#NAME, &NAME##Worker, __FILE__, __LINE__); \
  void NAME##Worker()

#endif  // CONVEYOR_LAUNCH_WORKER_TESTING_H_
