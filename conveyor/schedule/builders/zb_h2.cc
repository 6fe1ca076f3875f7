#include "conveyor/schedule/builders/zb_h2.h"

#include "conveyor/schedule/builders/builder_util.h"
#include "conveyor/schedule/builders/greedy_zero_bubble.h"

namespace conveyor {

Program BuildZbH2(const ScheduleOptions& options) {
  CheckPipelineOptions(options, "zb-h2");
  CheckSingleChunk(options, "zb-h2");
  return GreedyZeroBubble(Layout::Loop(options.pp, 1, options.microbatches), 2 * options.pp - 1);
}

}  // namespace conveyor
