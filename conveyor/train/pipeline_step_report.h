// What the ranks of one pipeline tell each other at the end of a step, in one gather: each
// rank's send posting times (the communication breakdown needs every rank's), when each of
// its computes ran (ranks sharing cores need every rank's to tell their own work from the
// waiting; compute_placement.h), the start and end of its part of the step, and its share of
// the loss and auxiliary losses. Gathered before the update, so that
// every rank knows whether the step is finite.
#ifndef CONVEYOR_TRAIN_PIPELINE_STEP_REPORT_H_
#define CONVEYOR_TRAIN_PIPELINE_STEP_REPORT_H_

#include <vector>

#include "conveyor/comm/transport.h"

namespace conveyor {

// One rank's part of the step.
struct RankStepReport {
  std::vector<double> send_posts;  // per send of the program (zero for other ranks' sends)
  std::vector<double> computes;    // start, end per compute of the program (zero: others')
  double start = 0;                // its pipeline part began (seconds, shared clock)
  double end = 0;                  // and ended
  double loss = 0;                 // its last stages' summed scaled losses (0 on others)
  std::vector<double> auxiliary;   // its stages' auxiliary losses, in the model's name order
  // Tokens each expert of each MoE block received, then the copies it dropped, the blocks in
  // the model's order one after the other (zeros for the blocks of other ranks' stages).
  std::vector<double> expert_load;
};

// The pipeline's step, the same on every rank of it.
struct PipelineStepReport {
  std::vector<double> send_posts;   // every rank's, summed: the posting time of each send
  std::vector<double> computes;     // every rank's, summed: start, end of each compute
  double first_start = 0;           // the earliest rank's start
  double last_end = 0;              // the latest rank's end
  double loss = 0;                  // the ranks' losses summed
  std::vector<double> auxiliary;    // the ranks' auxiliary losses summed, name by name
  std::vector<double> expert_load;  // the ranks' expert loads summed
};

// Gathers `mine` over `pipeline` (null: this rank alone). Collective over `pipeline`.
// Precondition: every rank's send_posts, computes, auxiliary and expert_load have the same
// lengths (the program's; the model's auxiliary loss names and expert blocks).
PipelineStepReport GatherStepReports(Transport* pipeline, const RankStepReport& mine);

}  // namespace conveyor

#endif  // CONVEYOR_TRAIN_PIPELINE_STEP_REPORT_H_
