#include "conveyor/schedule/builders/dualpipe.h"

#include <algorithm>

#include "conveyor/common/error.h"
#include "conveyor/schedule/builders/builder_util.h"
#include "conveyor/schedule/builders/dualpipe_phases.h"
#include "conveyor/schedule/builders/greedy_zero_bubble.h"

namespace conveyor {

Program BuildDualPipe(const ScheduleOptions& options) {
  CheckPipelineOptions(options, "dualpipe");
  CheckTwoChunks(options, "dualpipe");
  const int p = options.pp, m = options.microbatches;
  CONVEYOR_CHECK(m >= 2) << "dualpipe sends micro-batches both ways and needs at least 2, got "
                         << m;
  const Layout layout = Layout::Dual(p, m);
  // The phases need p even, m even and m >= 2p; otherwise the greedy zero-bubble scheduler
  // orders the same two-direction layout (no overlapped pairs), with DualPipe's memory
  // target of p + 1 micro-batch activations per rank.
  if (p % 2 != 0 || m % 2 != 0 || m < 2 * p) return GreedyZeroBubble(layout, p + 1);
  Program program(layout);
  const int half = m / 2;
  for (int r = 0; r < p; ++r) {
    const int down = r, up = 2 * p - 1 - r;  // stage of the forward / reverse direction
    const bool first_half = r < p / 2;
    DualPipeRank rank{p / 2,
                      std::min(r, p - 1 - r),
                      {first_half ? down : up, first_half ? up : down},
                      {first_half ? 0 : half, first_half ? half : 0},
                      half};
    program.ranks[r] = DualPipePhases(rank);
  }
  return program;
}

}  // namespace conveyor
