#include "conveyor/schedule/builders/naive.h"

#include "conveyor/schedule/builders/builder_util.h"

namespace conveyor {

Program BuildNaive(const ScheduleOptions& options) {
  CheckPipelineOptions(options, "naive");
  CheckSingleChunk(options, "naive");
  Program program(Layout::Loop(options.pp, 1, options.microbatches));
  const std::vector<int> one_group = {options.microbatches};
  for (int r = 0; r < options.pp; ++r) {
    program.ranks[r] =
        OneFOneBOrder(ChunkedOrder(program.layout, r, Op::kForward, one_group, false),
                      ChunkedOrder(program.layout, r, Op::kBackward, one_group, false), 0);
  }
  return program;
}

}  // namespace conveyor
