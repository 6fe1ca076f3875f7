#include "conveyor/schedule/builders/1f1b.h"

#include "conveyor/schedule/builders/builder_util.h"

namespace conveyor {

Program Build1F1B(const ScheduleOptions& options) {
  CheckPipelineOptions(options, "1f1b");
  CheckSingleChunk(options, "1f1b");
  const int p = options.pp, m = options.microbatches;
  Program program(Layout::Loop(p, 1, m));
  for (int r = 0; r < p; ++r) {
    program.ranks[r] =
        OneFOneBOrder(ChunkedOrder(program.layout, r, Op::kForward, {m}, false),
                      ChunkedOrder(program.layout, r, Op::kBackward, {m}, false), p - r - 1);
  }
  return program;
}

}  // namespace conveyor
