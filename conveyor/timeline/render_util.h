// Helpers shared by the timeline renderers (ASCII, SVG, Chrome trace). Internal to
// conveyor/sim; stateless and thread-safe.
#ifndef CONVEYOR_TIMELINE_RENDER_UTIL_H_
#define CONVEYOR_TIMELINE_RENDER_UTIL_H_

#include <string>
#include <vector>

#include "conveyor/timeline/timeline.h"

namespace conveyor {

// Checks what every renderer relies on: num_ranks >= 0, every span on a rank in
// [0, num_ranks) with finite times and start <= end, likewise every phase, and finite counter
// samples. Throws UserError naming the bad span, phase or sample.
void CheckTimeline(const Timeline& timeline);

// CheckTimeline(), then the compute spans (IsCompute) of each rank sorted by start time, as
// pointers into `timeline` (which must outlive the result).
std::vector<std::vector<const Span*>> ComputeSpansByRank(const Timeline& timeline);

// Duration of the shortest compute span that takes time; 0 when there is none.
double ShortestComputeSpan(const Timeline& timeline);

// Which of its rank's stages a span's stage is: 0 for the lowest stage the rank runs in the
// timeline, 1 for the next, ... (interleaved and V chunks). For OVERLAP_F_B: the forward
// half's stage.
class ChunkMap {
 public:
  explicit ChunkMap(const Timeline& timeline);
  int chunk(const Span& span) const { return chunk(span.rank, span.action.stage); }
  int chunk(int rank, int stage) const;

 private:
  std::vector<std::vector<int>> stages_of_rank_;  // sorted, unique
};

// A round step (1, 2 or 5 times a power of ten) that cuts `length` into about `parts` parts.
// Precondition: length > 0, parts >= 1.
double NiceStep(double length, int parts);

// A number for humans: up to `digits` significant digits, no exponent for ordinary times,
// no trailing zeros ("3", "0.25", "1500").
std::string FormatNumber(double value, int digits = 4);

}  // namespace conveyor

#endif  // CONVEYOR_TIMELINE_RENDER_UTIL_H_
