#include "conveyor/schedule/builders/forward_only.h"

namespace conveyor {

Program BuildForwardOnly(const Layout& layout) {
  Program program(layout);
  for (int r = 0; r < layout.num_ranks(); ++r) {
    for (int s : layout.stages_of(r)) {
      for (int mb = layout.first_microbatch(s); mb < layout.end_microbatch(s); ++mb) {
        program.ranks[r].push_back(Action{Op::kForward, s, mb});
      }
    }
  }
  return program;
}

}  // namespace conveyor
