// The activation memory a program holds on each rank: what stays alive from a forward until
// its backward (or, split, until its I and W) frees it, followed in each rank's own order.
// The verifier's memory bound and the simulator's memory model both read it.
//
// Pure functions of the program; nothing is kept.
#ifndef CONVEYOR_SCHEDULE_ACTIVATION_MEMORY_H_
#define CONVEYOR_SCHEDULE_ACTIVATION_MEMORY_H_

#include <functional>
#include <vector>

#include "conveyor/schedule/program.h"

namespace conveyor {

// Calls apply(op, stage) for each action of `actions` in order, an OVERLAP_F_B unit as its
// forward half, then its backward half: the order in which a rank's memory comes and goes.
void ForEachHalf(const std::vector<Action>& actions, const std::function<void(Op, int)>& apply);

// The activations each rank holds at its peak, in (stage, micro-batch) units, following each
// rank's own order (F adds one, B or W frees one).
std::vector<int> PeakInFlight(const Program& program);

// The same with weights: F adds `mem_b`, I frees mem_b - mem_w, W frees mem_w, B frees mem_b.
std::vector<double> PeakActivations(const Program& program, double mem_b, double mem_w);

// The same with a size per stage: F of stage s adds mem_b[s], W frees w_share of it, I the
// rest, B all of it. UserError when mem_b does not have one entry per stage.
std::vector<double> PeakActivations(const Program& program, const std::vector<double>& mem_b,
                                    double w_share);

}  // namespace conveyor

#endif  // CONVEYOR_SCHEDULE_ACTIVATION_MEMORY_H_
