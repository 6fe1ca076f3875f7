// Test support for the end-to-end tests of the `conveyor` binary (cli_test.cc,
// train_cli_test.cc): running it, scratch folders with a corpus, comparing its losses.
#ifndef CONVEYOR_CLI_CLI_TESTING_H_
#define CONVEYOR_CLI_CLI_TESTING_H_

#include <gtest/gtest.h>

#include <string>

namespace conveyor {

struct Result {
  int code;         // the exit status; -1 when killed by a signal
  std::string out;  // stdout
  std::string err;  // stderr
};

// Runs `command` in a shell and waits for it. Thread-compatible; processes running the tests
// in parallel do not share files.
Result Shell(const std::string& command);

// Runs the binary under test (CONVEYOR_BINARY) with `args`, bounded by 180 s.
Result Conveyor(const std::string& args);

// A new, empty folder TempDir()/conveyor_cli_NAME.PID, removed when the tests have run.
std::string ScratchDir(const std::string& name);

// ScratchDir(name) holding corpus.txt, 100 short lines.
std::string ScratchWithCorpus(const std::string& name);

// Success when the --metrics files `want_file` and `got_file` both hold `steps` losses and
// each of got's is within `relative` x want's of want's; the failure names every step off.
::testing::AssertionResult SameLosses(const std::string& want_file, const std::string& got_file,
                                      size_t steps, double relative);

// The number of '\n' in `text`.
int Lines(const std::string& text);

}  // namespace conveyor

#endif  // CONVEYOR_CLI_CLI_TESTING_H_
