// Where the ranks of a CPU run compute, as the simulator's ComputeSharing (sim/
// compute_sharing.h) for one pipeline: which of its ranks share a machine's cores, and how
// many busy pipeline ranks those cores run at full speed.
//
// Each rank tells every other (one gather over the world, at start-up) its machine (host
// name and boot id: network namespaces on one machine share its cores), the cores it may
// run on (its CPU affinity), its intra-op threads and its mesh coordinates. A machine's
// capacity, counted in pipeline ranks, is cores / (threads per rank x copies), copies being
// how many ranks of the world on that machine stand beside each of this pipeline's ranks
// there (its data- and tensor-parallel peers, busy at about the same times). On a GPU, or
// for a lone rank, nothing is shared (ComputeSharing's note on GPUs).
#ifndef CONVEYOR_TRAIN_COMPUTE_PLACEMENT_H_
#define CONVEYOR_TRAIN_COMPUTE_PLACEMENT_H_

#include <string>
#include <vector>

#include "conveyor/comm/transport.h"
#include "conveyor/mesh/mesh.h"
#include "conveyor/schedule/program.h"
#include "conveyor/sim/compute_sharing.h"
#include "conveyor/timeline/timeline.h"

namespace conveyor {

// What one rank reports about where it computes.
struct RankPlacement {
  double machine = 0;  // an id of its machine, exact in a double
  int cores = 1;       // CPUs it may run on
  int threads = 1;     // intra-op threads
  MeshCoords coords;
};

// This process's machine id, cores and threads, with `coords`.
RankPlacement ThisRankPlacement(const MeshCoords& coords);

// The sharing of the pipeline (dp, tp) = (coords.dp, coords.tp) of `everyone` (one entry per
// world rank), one device per machine holding its ranks. Pure.
ComputeSharing PipelineSharing(const std::vector<RankPlacement>& everyone, const MeshCoords& coords,
                               int pp);

// ThisRankPlacement gathered over `world` (null: this rank alone), then PipelineSharing.
// Collective over `world`.
ComputeSharing GatherPipelineSharing(Transport* world, const MeshCoords& coords, int pp);

// The computes of a step, every pipeline rank's, as one vector: (start, end) per compute
// action of `program` (per half of an OVERLAP_F_B unit, which the executor runs as two),
// rank 0's list first, each rank's in its list's order.
//
// `rank`'s slots filled from the kRun spans of its measured `step` (the others zero), to be
// summed over the pipeline (pipeline_step_report.h). REQUIRES: `step` holds `rank`'s kRun
// spans as the executor records them, one per compute (two per OVERLAP_F_B), in order.
std::vector<double> ComputeSlots(const Program& program, const Timeline& step, int rank);

// The work each of `rank`'s computes held (IntrinsicSeconds under `sharing`), in its list's
// order, from every rank's slots `computes` (REQUIRES: the program's size).
std::vector<double> ComputeWork(const Program& program, const std::vector<double>& computes,
                                const ComputeSharing& sharing, int rank);

}  // namespace conveyor

#endif  // CONVEYOR_TRAIN_COMPUTE_PLACEMENT_H_
