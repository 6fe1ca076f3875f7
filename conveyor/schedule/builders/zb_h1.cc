#include "conveyor/schedule/builders/zb_h1.h"

#include "conveyor/schedule/builders/builder_util.h"

namespace conveyor {

Program BuildZbH1(const ScheduleOptions& options) {
  CheckPipelineOptions(options, "zb-h1");
  CheckSingleChunk(options, "zb-h1");
  const int p = options.pp, m = options.microbatches;
  Program program(Layout::Loop(p, 1, m));
  for (int r = 0; r < p; ++r) {
    const std::vector<Action> f_and_i =
        OneFOneBOrder(ChunkedOrder(program.layout, r, Op::kForward, {m}, false),
                      ChunkedOrder(program.layout, r, Op::kBackwardInput, {m}, false), p - r - 1);
    program.ranks[r] = DeferWeightPasses(f_and_i, r);
  }
  return program;
}

}  // namespace conveyor
