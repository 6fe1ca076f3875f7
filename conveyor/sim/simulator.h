// Discrete-event simulation of a program under a cost model: time, memory, messages.
//
// Every rank runs its actions in order; an action starts when its rank is free and its
// producers have finished, plus transfer_time() for a producer on another rank. SEND/RECV
// actions in a lowered program take no time (they post asynchronous transfers). Memory
// follows CostModel::mem_b / mem_w. Gradient reductions (CostModel::reduce) run on a
// channel per rank beside its actions; a rank's step ends after its last one.
//
// OVERLAP_F_B: with an overlap cost given (StageCost::overlap >= 0) the unit starts when
// both halves' inputs are there and both halves finish together; without one the halves run
// back to back, each starting once its own inputs are there (and the timeline shows them
// as two spans).
//
// Steady state: the same program run `steady_state_steps` times back to back, each rank
// starting step k+1 right after its own last action of step k (plus its optimizer step),
// with no global synchronisation. The period is the growth of the makespan per extra step
// in the second half of that run; it is what zero-bubble papers call the schedule's time.
#ifndef CONVEYOR_SIM_SIMULATOR_H_
#define CONVEYOR_SIM_SIMULATOR_H_

#include <cstdint>
#include <vector>

#include "conveyor/schedule/program.h"
#include "conveyor/sim/cost_model.h"
#include "conveyor/timeline/timeline.h"

namespace conveyor {

struct SimOptions {
  int steady_state_steps = 6;  // 0 or 1 = skip the steady-state run
};

struct SimResult {
  double makespan = 0;       // step 0's last action's end
  double reduced_end = 0;    // step 0's end with its gradient reductions (CostModel::reduce)
  std::vector<double> busy;  // per rank, time spent computing
  std::vector<double> idle;  // per rank, makespan - busy
  double work = 0;           // the step's computes at full speed, all ranks
  // 1 - work / (room * makespan): the share of the ranks' compute left idle, room being
  // the ranks (ComputeSharing::Room: as many as run at full speed at once when they share
  // devices; then a rank's busy time exceeds its work).
  double bubble_fraction = 0;
  std::vector<double> peak_activations;  // per rank, in units of mem_b
  std::int64_t p2p_messages = 0;
  double p2p_bytes = 0;
  double steady_state_period = 0;  // 0 when not computed
  Timeline timeline;               // one step; the reductions as kDataParallel phases
};

// Precondition: Verify(program) reports no kMissing/kDuplicate/kBadAction findings. Throws
// DeadlockError (schedule/lower.h) when the program cannot complete.
SimResult Simulate(const Program& program, const CostModel& costs, const SimOptions& options = {});

}  // namespace conveyor

#endif  // CONVEYOR_SIM_SIMULATOR_H_
