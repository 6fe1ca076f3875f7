// A forward-only program over any layout: evaluation and generation run the stages as a
// pipeline without backward. Each rank runs its stages in ascending order, every
// micro-batch of a stage before the next stage (GPipe's forward half), which respects every
// layout's dependencies (loop, V, dual) and so never deadlocks.
//
// The result has no backward: Verify() reports it missing; Lower() and the executor's
// RunInference accept it.
#ifndef CONVEYOR_SCHEDULE_BUILDERS_FORWARD_ONLY_H_
#define CONVEYOR_SCHEDULE_BUILDERS_FORWARD_ONLY_H_

#include "conveyor/schedule/program.h"

namespace conveyor {

Program BuildForwardOnly(const Layout& layout);

}  // namespace conveyor

#endif  // CONVEYOR_SCHEDULE_BUILDERS_FORWARD_ONLY_H_
