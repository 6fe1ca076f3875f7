// Fuzz target: a schedule CSV as `conveyor plan --load` handles it: ReadProgramCsv
// (conveyor/schedule/program_csv.h, naming detected), then VerifyOrThrow, Lower and Simulate
// on what was read. Every input is either refused with a UserError or planned; a program
// that verifies writes back as CSV that reads as the same program. Anything else (a crash,
// another exception, a sanitizer report, an input slower than the run's -timeout) is a
// finding.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "conveyor/common/error.h"
#include "conveyor/schedule/lower.h"
#include "conveyor/schedule/program_csv.h"
#include "conveyor/schedule/verify.h"
#include "conveyor/sim/simulator.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace conveyor;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const LoadedProgram loaded = ReadProgramCsv(text);
    VerifyOrThrow(loaded.program);
    const std::string csv = ProgramToCsv(loaded.program);
    const std::string again =
        ProgramToCsv(ReadProgramCsv(csv, CsvReadOptions{Naming::kCurrent}).program);
    CONVEYOR_ASSERT(again == csv) << "the program read back as\n" << again << "instead of\n" << csv;
    Lower(loaded.program);
    Simulate(loaded.program, CostModel{});
  } catch (const UserError&) {
  }
  return 0;
}
