#include "conveyor/schedule/builders/interleaved_zb.h"

#include "conveyor/schedule/builders/builder_util.h"
#include "conveyor/schedule/builders/greedy_zero_bubble.h"

namespace conveyor {

Program BuildInterleavedZb(const ScheduleOptions& options) {
  CheckPipelineOptions(options, "interleaved-zb");
  const int v = ResolveChunks(options, "interleaved-zb", 2, 2);
  // Interleaved 1F1B's rank-0 memory: its warm-up (2(p-1) + (v-1)p forwards) plus one.
  const int cap = (v + 1) * options.pp - 1;
  return GreedyZeroBubble(Layout::Loop(options.pp, v, options.microbatches), cap);
}

}  // namespace conveyor
