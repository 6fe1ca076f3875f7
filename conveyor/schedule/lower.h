// Lowering: turn a compute-only program into one with explicit communication.
//
// Lower() runs all ranks round-robin, one action per rank per round, each action only once
// its producers have run. When a compute action whose result crosses to another rank runs,
// its SEND goes right after it on the producing rank and the matching RECV at the current
// end of the consuming rank's list, i.e. the receive is posted as early as the order of the
// program allows and is waited on only by the compute that consumes it. Stages on the same
// rank hand tensors over directly and get no SEND/RECV.
//
// When no rank can progress, Lower() throws DeadlockError naming, for every unfinished
// rank, the action it is stuck at and the producer it waits for.
#ifndef CONVEYOR_SCHEDULE_LOWER_H_
#define CONVEYOR_SCHEDULE_LOWER_H_

#include <vector>

#include "conveyor/common/error.h"
#include "conveyor/schedule/program.h"

namespace conveyor {

// A program whose ranks wait on each other in a cycle. It is bad input (a user's schedule
// file, a builder's bug shows up as an InternalError in tests), hence a UserError.
class DeadlockError : public UserError {
 public:
  explicit DeadlockError(const std::string& what) : UserError(what) {}
};

// Precondition: `program` holds no SEND/RECV (comm actions in the input are dropped first,
// so lowering a lowered program gives the same result). Actions must be valid for the
// layout (see Verify()); invalid ones raise UserError.
Program Lower(const Program& program);

// `program` with a REDUCE_GRAD for every stage with a backward, right after the last action
// on its rank that adds to the stage's weight gradients (its last B or W, or an
// OVERLAP_F_B whose backward half is one): from there on the stage's gradients are final
// and a data-parallel reduction of them may start. REDUCE_GRADs already in `program` are
// dropped first. Works on compute-only and lowered programs alike.
Program WithGradReductions(const Program& program);

// For each action of one rank's list `actions`: the stage whose weight gradients are final
// once it is done (the last action of the list adding to them, as WithGradReductions marks),
// or -1.
std::vector<int> GradientsFinalAfter(const std::vector<Action>& actions);

}  // namespace conveyor

#endif  // CONVEYOR_SCHEDULE_LOWER_H_
