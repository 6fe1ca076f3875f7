// Test support for the end-to-end tests of the `conveyor` binary (cli_test.cc,
// train_cli_test.cc): running it, scratch folders with a corpus, reading its metrics.
#ifndef CONVEYOR_CLI_CLI_TESTING_H_
#define CONVEYOR_CLI_CLI_TESTING_H_

#include <string>
#include <vector>

namespace conveyor {

struct Result {
  int code;         // the exit status; -1 when killed by a signal
  std::string out;  // stdout
  std::string err;  // stderr
};

// Runs `command` in a shell and waits for it. Thread-compatible; processes running the tests
// in parallel do not share files.
Result Shell(const std::string& command);

// Runs the binary under test (CONVEYOR_BINARY) with `args`, bounded by 60 s.
Result Conveyor(const std::string& args);

// A new folder TempDir()/conveyor_cli_NAME.PID holding corpus.txt, 100 short lines.
std::string ScratchWithCorpus(const std::string& name);

// The per-step losses of a --metrics file.
std::vector<double> StepLosses(const std::string& metrics_file);

// The number of '\n' in `text`.
int Lines(const std::string& text);

}  // namespace conveyor

#endif  // CONVEYOR_CLI_CLI_TESTING_H_
