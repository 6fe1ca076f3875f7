#include "conveyor/launch/worker_testing.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string_view>

#include "conveyor/common/env.h"
#include "conveyor/common/error.h"
#include "conveyor/common/remove_tree.h"

namespace conveyor {
namespace {

// The worker a launched rank runs, and the folder where it records that it finished.
constexpr char kWorkerVariable[] = "CONVEYOR_TEST_WORKER";
constexpr char kFolderVariable[] = "CONVEYOR_TEST_WORKER_DIR";

std::string FinishedFile(const std::string& folder, int rank) {
  return folder + "/rank-" + std::to_string(rank) + ".finished";
}

class WorkerTest : public ::testing::Test {
 public:
  explicit WorkerTest(void (*body)()) : body_(body) {}

  void TestBody() override {
    body_();
    if (!HasFailure()) MarkWorkerFinished();
  }

 private:
  void (*body_)();
};

}  // namespace

WorkerRun LaunchWorker(int nproc, const std::string& name, LaunchOptions options) {
  CONVEYOR_CHECK(options.deadline.count() > 0)
      << "worker " << name << ": a worker launch needs a deadline";
  char self[PATH_MAX] = {};
  CONVEYOR_CHECK(readlink("/proc/self/exe", self, sizeof(self) - 1) > 0)
      << "worker " << name << ": cannot find this test binary";
  std::string folder = ::testing::TempDir() + "conveyor-worker-XXXXXX";
  CONVEYOR_CHECK(mkdtemp(folder.data()) != nullptr)
      << "worker " << name << ": cannot create a folder from " << folder;
  options.extra_env[kWorkerVariable] = name;
  options.extra_env[kFolderVariable] = folder;
  WorkerRun run;
  run.launch = LaunchLocal(nproc, {self, "--gtest_filter=Worker." + name}, options);
  for (int r = 0; r < nproc; ++r) {
    if (std::filesystem::exists(FinishedFile(folder, r))) run.finished.push_back(r);
  }
  RemoveTree(folder);
  return run;
}

void MarkWorkerFinished() {
  const char* folder = std::getenv(kFolderVariable);
  const char* rank = std::getenv("RANK");
  if (folder == nullptr || rank == nullptr) {
    ADD_FAILURE() << "MarkWorkerFinished outside a launched worker (no " << kFolderVariable
                  << " or RANK)";
    return;
  }
  std::ofstream out(FinishedFile(folder, static_cast<int>(ParseEnvInt("RANK", rank, 0, INT_MAX))));
  out << "finished\n";
  out.close();
  if (!out) ADD_FAILURE() << "rank " << rank << " could not record that it finished in " << folder;
}

bool RegisterWorker(const char* name, void (*body)(), const char* file, int line) {
  const char* wanted = std::getenv(kWorkerVariable);
  if (wanted == nullptr || std::string_view(wanted) != name) return false;
  ::testing::RegisterTest("Worker", name, nullptr, nullptr, file, line,
                          [body]() -> WorkerTest* { return new WorkerTest(body); });
  return true;
}

}  // namespace conveyor
