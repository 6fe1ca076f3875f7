#include "conveyor/common/reference_env_testing.h"

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

namespace conveyor {

namespace {

// stdout and stderr of the shell command `command`, and its exit status.
ReferenceRun Capture(const std::string& command) {
  ReferenceRun run;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return run;
  std::array<char, 4096> buffer;
  size_t n;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) {
    run.output.append(buffer.data(), n);
  }
  const int status = ::pclose(pipe);
  run.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

std::string FindReferencePython() {
  if (const char* set = std::getenv("CONVEYOR_REFERENCE_PYTHON"); set != nullptr && *set) {
    return std::filesystem::exists(set) ? set : "";
  }
  ReferenceRun where = Capture(CONVEYOR_TESTDATA_DIR "/../scripts/reference-env --path");
  while (!where.output.empty() && where.output.back() == '\n') where.output.pop_back();
  if (!where.ok() || where.output.empty()) return "";
  // Complete only once reference-env wrote its marker beside bin/.
  const std::filesystem::path python(where.output);
  const auto marker = python.parent_path().parent_path() / ".conveyor-reference-complete";
  return std::filesystem::exists(marker) ? where.output : "";
}

}  // namespace

const std::string& ReferencePython() {
  static const std::string python = FindReferencePython();
  return python;
}

ReferenceRun RunReferenceScript(const std::string& script, const std::string& args) {
  return Capture(ReferencePython() + " " CONVEYOR_TESTDATA_DIR "/reference/" + script + " " + args);
}

}  // namespace conveyor
