// Where each rank's pipeline time went over a run, as one table every rank holds: what each
// rank measured (its RankTotals, averaged), next to the simulator's activation model for the
// same program.
#ifndef CONVEYOR_TRAIN_RANK_METRICS_H_
#define CONVEYOR_TRAIN_RANK_METRICS_H_

#include <vector>

namespace conveyor {

class Trainer;

// Where one rank's pipeline time went, averaged over the steps after the first (seconds per
// step; the whole step when only one ran). bubble_fraction = idle / pipeline step time,
// where idle = step - compute: waiting for messages, posting them, bookkeeping. The waits
// are split as CommBreakdown (conveyor/profile/comm_breakdown.h) describes.
struct RankMetrics {
  int rank = 0;
  double step_s = 0;     // the pipeline part of a step (the executor's)
  double compute_s = 0;  // F, B, I, W
  double comm_wait_s = 0;
  double transfer_wait_s = 0;    // of comm_wait_s: exposed communication
  double dependency_wait_s = 0;  // of comm_wait_s: waiting for a peer's compute
  double post_s = 0;             // handing messages to the transport
  double idle_s = 0;
  double bubble_fraction = 0;
  double comm_overlap = 1;  // CommBreakdown::overlap_fraction
  double sent_bytes = 0;
  // Most CPU memory allocated during a step beyond what was held when it began (the
  // activations and gradients in flight), over all steps; the process's count, so with ranks
  // as threads it covers all of them.
  double peak_activation_bytes = 0;
  // The simulator's activation model for the same program: the most micro-batches this rank
  // holds at once (counted from F until B or W), and the most bytes, each forward counted
  // with the bytes a forward of its stage was measured to leave allocated.
  double predicted_peak_microbatches = 0;
  double predicted_peak_activation_bytes = 0;
};

// Every rank's metrics, in rank order, on every rank: each rank's own measurements
// (trainer.totals().Means) and the forward bytes of its stages travel through
// Transport::AllGather, field by field; the predicted fields come from the simulator's
// activation model under those bytes. Collective over the trainer's world: every rank calls
// it at the same point of the run.
std::vector<RankMetrics> GatherRankMetrics(const Trainer& trainer);

// The whole pipeline's bubble as the simulator counts it: 1 - (sum of the ranks' compute) /
// (ranks x pipeline_s), pipeline_s being the time from the first rank's start of the
// pipeline to the last rank's end (RankTotals::pipeline_s()).
double MeasuredBubble(const std::vector<RankMetrics>& ranks, double pipeline_s);
// The share of the ranks' step time blocked on messages in transit: sum of transfer_wait_s
// over sum of step_s.
double ExposedCommFraction(const std::vector<RankMetrics>& ranks);

}  // namespace conveyor

#endif  // CONVEYOR_TRAIN_RANK_METRICS_H_
