// Test support: the reference environment (scripts/reference-env), a Python with the
// libraries users already run (pip's PyTorch, transformers, tokenizers, sentencepiece,
// Megatron-Core, TensorBoard, peft; testdata/reference/requirements.txt), against which tests check
// what conveyor reads and writes.
#ifndef CONVEYOR_COMMON_REFERENCE_ENV_TESTING_H_
#define CONVEYOR_COMMON_REFERENCE_ENV_TESTING_H_

#include <string>

namespace conveyor {

// The reference environment's interpreter: $CONVEYOR_REFERENCE_PYTHON when set (scripts/test
// exports it), else where `scripts/reference-env --path` says it is; empty when that file
// does not exist. Computed once; thread-safe.
const std::string& ReferencePython();

// What one run of a reference script did: its exit status and its stdout and stderr, merged.
struct ReferenceRun {
  int status = -1;
  std::string output;
  bool ok() const { return status == 0; }
};

// Runs `ReferencePython() testdata/reference/SCRIPT ARGS` (`args` is pasted into a shell
// command line as is: quote what needs it). Precondition: ReferencePython() is not empty.
ReferenceRun RunReferenceScript(const std::string& script, const std::string& args);

}  // namespace conveyor

// Skips the current test, naming the script that makes the environment, where it is absent.
#define CONVEYOR_SKIP_WITHOUT_REFERENCE_ENV()                                             \
  do {                                                                                    \
    if (::conveyor::ReferencePython().empty()) {                                          \
      GTEST_SKIP() << "no reference environment (make it with scripts/reference-env, or " \
                      "set CONVEYOR_REFERENCE_PYTHON)";                                   \
    }                                                                                     \
  } while (0)

#endif  // CONVEYOR_COMMON_REFERENCE_ENV_TESTING_H_
