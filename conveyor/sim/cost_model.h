// Costs the simulator charges: per-stage compute, communication, activation memory.
//
// Times are in any unit (the CLI uses abstract units by default, seconds when measured).
#ifndef CONVEYOR_SIM_COST_MODEL_H_
#define CONVEYOR_SIM_COST_MODEL_H_

#include <vector>

#include "conveyor/sim/compute_sharing.h"

namespace conveyor {

struct StageCost {
  double f = 1;         // forward
  double i = 1;         // backward for inputs
  double w = 1;         // backward for weights
  double b = -1;        // full backward; < 0 means i + w
  double overlap = -1;  // an OVERLAP_F_B unit; < 0 means f + b (no gain from overlapping)
  // Of f, and of i and b alike, the time spent waiting on communication inside the layers
  // (the experts' all-to-alls): what the other half of an OVERLAP_F_B unit can compute under
  // when the pairs run at once (CostModel::pairs_at_once).
  double comm_f = 0;
  double comm_b = 0;

  double full_backward() const { return b >= 0 ? b : i + w; }
  double overlapped(bool backward_is_input_only) const {
    if (overlap >= 0) return overlap;
    return f + (backward_is_input_only ? i : full_backward());
  }
};

struct CostModel {
  StageCost uniform;              // used for every stage not listed in `stages`
  std::vector<StageCost> stages;  // optional per-stage costs, indexed by stage

  double comm_latency = 0;    // per hop, per message
  double comm_bandwidth = 0;  // bytes per time unit; 0 = infinite
  double message_bytes = 0;   // one micro-batch's stage output (its gradient is the same size)

  // Activation memory of one micro-batch on one stage after its F (M_B), and the part of it
  // that only W frees (M_W); I frees M_B - M_W, B frees all. The default counts a
  // micro-batch as in flight from F until its B or W.
  double mem_b = 1;
  double mem_w = 1;

  double optimizer = 0;  // a rank's optimizer step after its last action (steady state)
  double post = 0;       // handing one message to the transport: charged to the compute
                         // that produced it, on its rank

  // Ranks that share a device: costs are then work, done at the device's shared rate.
  ComputeSharing sharing;

  // An OVERLAP_F_B unit without an `overlap` cost runs its halves at once (two threads, as
  // conveyor's executor runs them on the CPU), as one unit once both halves' inputs are
  // there: while one half waits on its communication (comm_f, comm_b) the other computes,
  // at best, so the unit takes max(F + X - comm_f - comm_b, F, X) for a forward F beside a
  // backward X (its I or B). false: the halves run one after the other, each as soon as its
  // own inputs are there.
  bool pairs_at_once = false;

  // Per stage, the data-parallel reduction of its gradients (empty, or 0 for a stage: none).
  // It starts once the stage's weight gradients are final on its rank (GradientsFinalAfter,
  // schedule/lower.h) and runs on a channel of the rank's own, beside the rank's later
  // actions, one stage after another in the order they become final; the rank's optimizer
  // step waits for its last one. Where ranks share a device (`sharing`) a reduction is work
  // on the rank's device like a compute (a CPU's collectives copy and add on its cores);
  // else it takes no compute.
  std::vector<double> reduce;

  const StageCost& cost(int stage) const {
    return stage < static_cast<int>(stages.size()) ? stages[stage] : uniform;
  }
  double reduce_time(int stage) const {
    return stage < static_cast<int>(reduce.size()) ? reduce[stage] : 0;
  }
  double transfer_time() const {
    return comm_latency + (comm_bandwidth > 0 ? message_bytes / comm_bandwidth : 0);
  }
};

}  // namespace conveyor

#endif  // CONVEYOR_SIM_COST_MODEL_H_
