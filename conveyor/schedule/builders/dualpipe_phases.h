// The eight phases DualPipe runs on each rank (DeepSeek-AI, DeepSeek-V3 Technical Report,
// arXiv:2412.19437, and the DualPipe reference schedule), shared by DualPipe and DualPipeV.
//
// A rank holds two chunks: chunk 0 is the one whose micro-batches reach it first, chunk 1
// the other. With n = ranks per direction (p/2 for DualPipe, p for DualPipeV), k = this
// rank's distance from its end of the pipe (min(r, p-1-r) for DualPipe, r for DualPipeV)
// and c = micro-batches per chunk:
//   1. 2(n-k-1) forwards of chunk 0
//   2. k+1 times: forward chunk 0, forward chunk 1
//   3. n-k-1 times: I of chunk 1 (its W queued), the oldest queued W, forward chunk 1
//   4. c-2n+k+1 times: (F chunk 0 ; B chunk 1) overlapped, (F chunk 1 ; B chunk 0) overlapped
//   5. n-k-1 times: B chunk 1, (F chunk 1 ; B chunk 0) overlapped
//   6. k+1 times: backward chunk 1, backward chunk 0; from the middle on (chunk 1 first
//      when k is odd, chunk 0 first when k is even) as I with W queued
//   7. n-k-1 times: the oldest queued W, I of chunk 0 (W queued)
//   8. k+1 times: the oldest queued W
// Precondition: c >= 2n - k (phase 4 runs at least once).
#ifndef CONVEYOR_SCHEDULE_BUILDERS_DUALPIPE_PHASES_H_
#define CONVEYOR_SCHEDULE_BUILDERS_DUALPIPE_PHASES_H_

#include <vector>

#include "conveyor/schedule/action.h"

namespace conveyor {

struct DualPipeRank {
  int n;                    // ranks per direction
  int k;                    // distance of this rank from its end
  int stage[2];             // the stages of chunk 0 and chunk 1
  int first_microbatch[2];  // micro-batches of chunk c: [first, first + per_chunk)
  int per_chunk;            // c
  // DualPipeV's last rank runs its first (F chunk 0 ; B chunk 1) pair one after the other.
  bool split_first_pair = false;
};

std::vector<Action> DualPipePhases(const DualPipeRank& rank);

}  // namespace conveyor

#endif  // CONVEYOR_SCHEDULE_BUILDERS_DUALPIPE_PHASES_H_
