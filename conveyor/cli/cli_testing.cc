#include "conveyor/cli/cli_testing.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "conveyor/common/remove_tree.h"

namespace conveyor {

Result Shell(const std::string& command) {
  // One file per process and call: ctest runs the cases of a test binary in parallel.
  static int calls = 0;
  const std::string err_path = ::testing::TempDir() + "conveyor_cli_stderr." +
                               std::to_string(::getpid()) + "." + std::to_string(calls++);
  Result result{-1, "", ""};
  FILE* pipe = popen((command + " 2>" + err_path).c_str(), "r");
  std::array<char, 4096> buffer;
  size_t n;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0)
    result.out.append(buffer.data(), n);
  const int status = pclose(pipe);
  result.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  {
    std::ifstream err(err_path);
    result.err.assign(std::istreambuf_iterator<char>(err), {});
  }
  std::filesystem::remove(err_path);
  return result;
}

Result Conveyor(const std::string& args) {
  // A guard against a hang only: on a busy machine a run may take many times its usual time.
  return Shell(std::string("timeout 180 ") + CONVEYOR_BINARY + " " + args);
}

namespace {

// The folders ScratchDir made, removed when the tests have run (before the process exits,
// while everything is still alive).
class ScratchFolders : public ::testing::Environment {
 public:
  void Add(const std::string& path) { paths_.push_back(path); }
  void TearDown() override {
    std::error_code ignored;
    for (const std::string& path : paths_) RemoveTree(path, ignored);
    paths_.clear();
  }

 private:
  std::vector<std::string> paths_;
};

ScratchFolders* const scratch_folders = static_cast<ScratchFolders*>(
    ::testing::AddGlobalTestEnvironment(new ScratchFolders));  // owned by GoogleTest

}  // namespace

std::string ScratchDir(const std::string& name) {
  const std::string dir =
      ::testing::TempDir() + "conveyor_cli_" + name + "." + std::to_string(::getpid());
  RemoveTree(dir);
  std::filesystem::create_directories(dir);
  scratch_folders->Add(dir);
  return dir;
}

std::string ScratchWithCorpus(const std::string& name) {
  const std::string dir = ScratchDir(name);
  std::ofstream out(dir + "/corpus.txt");
  for (int i = 0; i < 100; ++i) out << "a small corpus for a small model, line " << i << "\n";
  return dir;
}

namespace {

// The per-step losses of a --metrics file.
std::vector<double> StepLosses(const std::string& metrics_file) {
  std::ifstream in(metrics_file);
  const auto metrics = nlohmann::json::parse(in);
  std::vector<double> out;
  for (const auto& step : metrics["steps"]) out.push_back(step["loss"].get<double>());
  return out;
}

}  // namespace

::testing::AssertionResult SameLosses(const std::string& want_file, const std::string& got_file,
                                      size_t steps, double relative) {
  const std::vector<double> want = StepLosses(want_file), got = StepLosses(got_file);
  if (want.size() != steps || got.size() != steps) {
    return ::testing::AssertionFailure() << want.size() << " losses in " << want_file << " and "
                                         << got.size() << " in " << got_file << ", not " << steps;
  }
  ::testing::AssertionResult result = ::testing::AssertionSuccess();
  for (size_t k = 0; k < steps; ++k) {
    if (std::abs(got[k] - want[k]) <= relative * std::abs(want[k])) continue;
    if (result) result = ::testing::AssertionFailure();
    result << "step " << k << ": " << got[k] << " in " << got_file << ", " << want[k] << " in "
           << want_file << "; ";
  }
  return result;
}

int Lines(const std::string& text) {
  int lines = 0;
  for (char c : text) lines += c == '\n';
  return lines;
}

}  // namespace conveyor
