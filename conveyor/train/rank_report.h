// Where each rank's pipeline time went over a run, as one table every rank holds: what each
// rank measured (its RankMeasurements, averaged), next to the simulator's activation model
// for the same program.
#ifndef CONVEYOR_TRAIN_RANK_REPORT_H_
#define CONVEYOR_TRAIN_RANK_REPORT_H_

#include <vector>

#include "conveyor/common/startup_breakdown.h"
#include "conveyor/mesh/mesh.h"
#include "conveyor/profile/step_recorder.h"
#include "conveyor/train/pipeline_model.h"

namespace conveyor {

// Where one rank's pipeline time went, averaged over the steps after the first (seconds per
// step; the whole step when only one ran), and what the collectives of the other parallel
// axes cost it. bubble_fraction = idle / pipeline step time,
// where idle = step - compute: waiting for messages, posting them, bookkeeping. The waits
// are split as CommBreakdown (conveyor/profile/comm_breakdown.h) describes.
struct RankReport {
  int rank = 0;          // in the world
  MeshCoords coords;     // its place in the mesh (pp: its rank in its pipeline)
  double step_s = 0;     // the pipeline part of a step (the executor's)
  double compute_s = 0;  // F, B, I, W
  double work_s = 0;     // compute_s + post_s less what sharing cores with other ranks cost
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
  // On a GPU, its caching allocator's peaks during the last step (device_memory.h): bytes
  // held by tensors, and bytes the allocator reserved from the device; 0 on the CPU. Whole
  // counts, not relative to the step's start; ranks sharing a GPU see the same counts.
  double device_peak_allocated_bytes = 0;
  double device_peak_reserved_bytes = 0;
  // The most bytes of tensors held at once over the whole run, weights, gradients, optimizer
  // state and activations: the counting allocator's (MemoryTracker::max_bytes; ranks as
  // threads share it), or on a GPU the last step's device_peak_allocated_bytes. What
  // --memory-per-rank limits.
  double peak_tensor_bytes = 0;
  // The process's peak resident memory so far (PeakResidentBytes: everything it ever held at
  // once, weights and optimizer state included; ranks as threads share one count), and the
  // seconds from the process's start to its first step (reading the weights, building the
  // stages, connecting the groups).
  double peak_resident_bytes = 0;
  double startup_s = 0;
  double stage_build_s = 0;  // of startup_s: PipelineModel::stage_build_s
  // Start-up phase by phase, to the end of the first step (zeros where the run passed none).
  StartupBreakdown startup;
  // The collectives of the data- and tensor-parallel axes (zero without them), seconds per
  // step: all of the rank's data-parallel communication (the gradient reduction, ZeRO's
  // all-gather, the loss sum); the part of it that blocked the rank's own thread (the rest
  // ran on the reducer's thread while the pipeline computed); and the tensor-parallel
  // all-reduces inside the layers and around the norm, which always block.
  double dp_comm_s = 0;
  double dp_exposed_s = 0;
  double tp_comm_s = 0;
  // The expert-parallel all-to-alls (the counts and the token copies, out and back, forward
  // and backward) inside the MoE blocks, which block too.
  double ep_comm_s = 0;

  // The share of dp_comm_s hidden behind the pipeline, in [0, 1] (1 without any).
  double dp_hidden_fraction() const;
};

// Every rank's report, in world rank order, on every rank: each rank's own means (`mine`,
// RankMeasurements::Means) and the forward bytes its `recorder` measured for its stages
// travel through Transport::AllGather, field by field; the predicted fields come from the
// simulator's activation model under the bytes of that rank's pipeline. Collective over
// `model`'s world: every rank calls it at the same point of the run (Trainer::RankReports).
std::vector<RankReport> GatherRankReports(const PipelineModel& model, RankReport mine,
                                          const StepRecorder& recorder);

// The whole pipeline's bubble as the simulator counts it: 1 - (sum of the ranks' work) /
// (ranks x room x pipeline_s), pipeline_s being the time from the first rank's start of the
// pipeline to the last rank's end (RankMeasurements::pipeline_s()) and room the share of the
// ranks that can compute at full speed at once (1; ComputeSharing::Room / ranks where they
// share cores).
double MeasuredBubble(const std::vector<RankReport>& ranks, double pipeline_s, double room = 1);
// The share of the ranks' step time blocked on messages in transit: sum of transfer_wait_s
// over sum of step_s.
double ExposedCommFraction(const std::vector<RankReport>& ranks);

}  // namespace conveyor

#endif  // CONVEYOR_TRAIN_RANK_REPORT_H_
