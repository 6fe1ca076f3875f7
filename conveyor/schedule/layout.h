// Where stages live and which micro-batches flow through them.
//
// Words: a *stage* is one step of a pipeline; the *part* of the model it computes is its
// position in that pipeline (part_of). A *chunk* is one of the stages a rank holds, numbered
// 0, 1, ... in ascending stage order on that rank; *chunks per rank* (v) is how many.
//
// A pipeline model is cut into `num_stages` stages. Stages form one pipeline (directions = 1:
// stage s feeds s + 1) or two independent pipelines of equal length (directions = 2, as in
// DualPipe: stages [0, S/2) carry micro-batches [0, ceil(m/2)) and stages [S/2, S) carry the
// rest, each half a full copy of the model). Each stage lives on exactly one rank.
//
// Placements:
//   Loop: stage s on rank s mod p (GPipe, 1F1B with v = 1, interleaved with v > 1).
//   V:    two stages per rank; rank r holds stages r and 2p-1-r (ZB-V, DualPipeV).
//   Dual: V placement with two directions (DualPipe): rank r holds stage r of the forward
//         pipeline and stage p + (p-1-r), i.e. part p-1-r, of the reverse pipeline.
//
// Immutable after construction; safe to share across threads.
#ifndef CONVEYOR_SCHEDULE_LAYOUT_H_
#define CONVEYOR_SCHEDULE_LAYOUT_H_

#include <string>
#include <vector>

namespace conveyor {

enum class Placement { kLoop, kV, kDual, kCustom };

class Layout {
 public:
  // Preconditions (checked, UserError): ranks >= 1, chunks_per_rank >= 1, microbatches >= 1.
  static Layout Loop(int ranks, int chunks_per_rank, int microbatches);
  static Layout V(int ranks, int microbatches);
  static Layout Dual(int ranks, int microbatches);
  // Any stage -> rank map (a loaded program). Every rank in [0, ranks) must hold a stage.
  static Layout Custom(int ranks, std::vector<int> stage_to_rank, int microbatches, int directions);

  int num_ranks() const { return num_ranks_; }
  int num_stages() const { return static_cast<int>(stage_to_rank_.size()); }
  int num_microbatches() const { return num_microbatches_; }
  int directions() const { return directions_; }
  Placement placement() const { return placement_; }
  // Chunks per rank (v); for a custom layout the largest count on any rank.
  int chunks_per_rank() const;

  int rank_of(int stage) const { return stage_to_rank_[stage]; }
  const std::vector<int>& stage_to_rank() const { return stage_to_rank_; }
  // Ascending stage indices held by `rank`.
  const std::vector<int>& stages_of(int rank) const { return rank_to_stages_[rank]; }

  // Stages per pipeline (S / directions); the model is cut into this many parts.
  int pipeline_length() const { return num_stages() / directions_; }
  int pipeline_of(int stage) const { return stage / pipeline_length(); }
  // Position of `stage` within its pipeline: the part of the model it computes.
  int part_of(int stage) const { return stage % pipeline_length(); }
  bool is_first_stage(int stage) const { return part_of(stage) == 0; }
  bool is_last_stage(int stage) const { return part_of(stage) == pipeline_length() - 1; }
  // The neighbouring stage in the same pipeline, or -1 at its ends.
  int prev_stage(int stage) const { return is_first_stage(stage) ? -1 : stage - 1; }
  int next_stage(int stage) const { return is_last_stage(stage) ? -1 : stage + 1; }

  // Micro-batches [first, end) that flow through `stage`.
  int first_microbatch(int stage) const;
  int end_microbatch(int stage) const;
  bool runs(int stage, int microbatch) const {
    return microbatch >= first_microbatch(stage) && microbatch < end_microbatch(stage);
  }

  bool valid_stage(int stage) const { return stage >= 0 && stage < num_stages(); }

  // "4 ranks, 8 stages (V placement), 10 micro-batches".
  std::string Describe() const;

 private:
  Layout(int ranks, std::vector<int> stage_to_rank, int microbatches, int directions,
         Placement placement);

  int num_ranks_;
  int num_microbatches_;
  int directions_;
  Placement placement_;
  std::vector<int> stage_to_rank_;
  std::vector<std::vector<int>> rank_to_stages_;
};

}  // namespace conveyor

#endif  // CONVEYOR_SCHEDULE_LAYOUT_H_
