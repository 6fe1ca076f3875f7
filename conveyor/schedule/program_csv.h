// Programs as CSV text, the layout torch.distributed.pipelining reads and writes.
//
// One line per rank (line r is rank r), one cell per action in the text form of
// Action::ToString() ("0F1", "1SEND_F0", "(0F7;7B3)OVERLAP_F_B"), cells separated by commas.
// Compute-only and lowered programs (with SEND/RECV) use the same layout. Empty cells are
// idle slots: they are accepted on reading and dropped (a Program has no idle slots).
//
// Naming. PyTorch once wrote "B" for backward-for-inputs (today's "I") and "BW" for a full
// backward (today's "B"). Reading detects which naming a file uses:
//   legacy   when a cell holds "BW", or when B and W both appear for one (stage, micro-batch);
//   current  otherwise.
// Under legacy naming a "B" whose (stage, micro-batch) has no W is read as a full backward.
// CsvReadOptions::naming forces one naming. Writing always uses the current naming.
//
// Layout inference. p = number of lines, stages = largest stage + 1, micro-batches = largest
// micro-batch + 1, each stage on the rank whose line holds its actions. The placement is
// Loop or V when the stage -> rank map is exactly that one, Custom otherwise. The program
// has two directions (DualPipe) when the stage count S is even and stage 0 carries exactly
// micro-batches [0, ceil(m/2)) while stage S/2 carries exactly [ceil(m/2), m); with the V
// map that is Layout::Dual.
//
// All functions are thread-compatible (no shared state). Errors are UserError, one line each.
#ifndef CONVEYOR_SCHEDULE_PROGRAM_CSV_H_
#define CONVEYOR_SCHEDULE_PROGRAM_CSV_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "conveyor/schedule/action.h"
#include "conveyor/schedule/program.h"

namespace conveyor {

struct CsvReadOptions {
  // Forces a naming; unset = detect it (see above).
  std::optional<Naming> naming;
};

// Options from a command-line naming choice: "auto" (detect), "current" or "legacy".
// Throws UserError naming any other text.
CsvReadOptions ParseNamingChoice(std::string_view text);

struct LoadedProgram {
  Program program;
  Naming naming = Naming::kCurrent;  // the naming the file was read in
  // Human-readable remarks on what was assumed, e.g.
  // "legacy naming assumed: 'BW' appears (rank 0, column 12: '2BW0')".
  std::vector<std::string> notes;
};

// The program as CSV text, one line per rank, each ending in '\n'.
std::string ProgramToCsv(const Program& program);

// Writes ProgramToCsv(program) to `path`. Throws UserError when the file cannot be written.
void WriteProgramCsv(const Program& program, const std::string& path);

// Parses CSV text. Throws UserError for empty text, an unparsable cell (naming the rank,
// the 1-based column and the cell), a rank without actions, a stage on two ranks (naming
// both), a stage number that never appears, a program above the limits of
// pipeline_limits.h (checked before anything is sized by it), a micro-batch that some
// stages of its direction run and others never do (naming a cell that runs it), or a
// micro-batch number that never appears.
LoadedProgram ReadProgramCsv(std::string_view text, const CsvReadOptions& options = {});

// Reads and parses the file at `path`; errors as ReadProgramCsv, prefixed with the path, and
// a UserError when the file cannot be read.
LoadedProgram LoadProgramCsv(const std::string& path, const CsvReadOptions& options = {});

}  // namespace conveyor

#endif  // CONVEYOR_SCHEDULE_PROGRAM_CSV_H_
