#include "conveyor/schedule/builders/looped_bfs.h"

#include "conveyor/schedule/builders/builder_util.h"

namespace conveyor {

Program BuildLoopedBfs(const ScheduleOptions& options) {
  CheckPipelineOptions(options, "looped-bfs");
  const int v = ResolveChunks(options, "looped-bfs", 2, 1);
  const int m = options.microbatches;
  Program program(Layout::Loop(options.pp, v, m));
  for (int r = 0; r < options.pp; ++r) {
    const std::vector<Action> forwards = ChunkedOrder(program.layout, r, Op::kForward, {m}, false);
    std::vector<Action> order = forwards;
    for (auto it = forwards.rbegin(); it != forwards.rend(); ++it) {
      order.push_back(Action{Op::kBackward, it->stage, it->microbatch});
    }
    program.ranks[r] = std::move(order);
  }
  return program;
}

}  // namespace conveyor
