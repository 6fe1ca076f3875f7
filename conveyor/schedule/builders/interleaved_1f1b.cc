#include "conveyor/schedule/builders/interleaved_1f1b.h"

#include "conveyor/schedule/builders/builder_util.h"

namespace conveyor {

Program BuildInterleaved1F1B(const ScheduleOptions& options) {
  CheckPipelineOptions(options, "interleaved-1f1b");
  const int v = ResolveChunks(options, "interleaved-1f1b", 2, 2);
  const int p = options.pp, m = options.microbatches;
  Program program(Layout::Loop(p, v, m));
  const std::vector<int> groups = GroupSizes(m, p);
  for (int r = 0; r < p; ++r) {
    const int warmup = 2 * (p - r - 1) + (v - 1) * groups[0];
    program.ranks[r] =
        OneFOneBOrder(ChunkedOrder(program.layout, r, Op::kForward, groups, false),
                      ChunkedOrder(program.layout, r, Op::kBackward, groups, true), warmup);
  }
  return program;
}

}  // namespace conveyor
