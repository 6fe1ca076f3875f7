#include "conveyor/schedule/builders/dualpipe_v.h"

#include "conveyor/schedule/builders/builder_util.h"
#include "conveyor/schedule/builders/dualpipe_phases.h"
#include "conveyor/schedule/builders/zb_v.h"

namespace conveyor {

Program BuildDualPipeV(const ScheduleOptions& options) {
  CheckPipelineOptions(options, "dualpipe-v");
  CheckTwoChunks(options, "dualpipe-v");
  const int p = options.pp, m = options.microbatches;
  // The phases need m >= 2p; below that there is nothing to overlap and ZB-V's order on the
  // same V placement schedules the step.
  if (m < 2 * p) return BuildZbV(ScheduleOptions{p, m, 2});
  Program program(Layout::V(p, m));
  for (int r = 0; r < p; ++r) {
    DualPipeRank rank{p, r, {r, 2 * p - 1 - r}, {0, 0}, m, /*split_first_pair=*/r == p - 1};
    program.ranks[r] = DualPipePhases(rank);
  }
  return program;
}

}  // namespace conveyor
