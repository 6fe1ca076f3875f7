#include "conveyor/schedule/builders/gpipe.h"

#include "conveyor/schedule/builders/builder_util.h"

namespace conveyor {

Program BuildGpipe(const ScheduleOptions& options) {
  CheckPipelineOptions(options, "gpipe");
  CheckSingleChunk(options, "gpipe");
  const int m = options.microbatches;
  Program program(Layout::Loop(options.pp, 1, m));
  for (int r = 0; r < options.pp; ++r) {
    program.ranks[r] = OneFOneBOrder(ChunkedOrder(program.layout, r, Op::kForward, {m}, false),
                                     ChunkedOrder(program.layout, r, Op::kBackward, {m}, false), m);
  }
  return program;
}

}  // namespace conveyor
