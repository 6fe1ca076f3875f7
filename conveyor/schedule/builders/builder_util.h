// Pieces shared by the loop-placement builders (naive, GPipe, 1F1B, interleaved 1F1B,
// looped BFS, ZB-H1): option checks, per-rank orders of one kind of pass, and the
// one-forward-one-backward merge of a forward order with a backward order.
//
// Builders combine them: a rank's forwards and backwards are each listed in the order the
// schedule wants (ChunkedOrder), then merged (OneFOneBOrder), then, for split backward,
// the weight passes are placed (DeferWeightPasses).
#ifndef CONVEYOR_SCHEDULE_BUILDERS_BUILDER_UTIL_H_
#define CONVEYOR_SCHEDULE_BUILDERS_BUILDER_UTIL_H_

#include <string_view>
#include <vector>

#include "conveyor/schedule/action.h"
#include "conveyor/schedule/layout.h"
#include "conveyor/schedule/schedule_options.h"

namespace conveyor {

// Checks pp >= 1 and microbatches >= 1; the UserError names `schedule` and the bad value.
void CheckPipelineOptions(const ScheduleOptions& options, std::string_view schedule);

// For schedules with one stage per rank: chunks must be 0 (default) or 1.
void CheckSingleChunk(const ScheduleOptions& options, std::string_view schedule);

// For schedules with two stages per rank (a V, or DualPipe's two directions): chunks must be
// 0 (default) or 2.
void CheckTwoChunks(const ScheduleOptions& options, std::string_view schedule);

// The number of stages per rank: `default_chunks` when options.chunks == 0, else
// options.chunks, which must be at least `min_chunks` (UserError naming the value).
int ResolveChunks(const ScheduleOptions& options, std::string_view schedule, int default_chunks,
                  int min_chunks);

// Sizes of consecutive micro-batch groups: max(1, m / p) groups whose sizes differ by at
// most one, larger groups first. With m >= p every group holds between p and 2p - 1
// micro-batches; with m < p there is one group of m. Precondition: m >= 1, p >= 1.
std::vector<int> GroupSizes(int microbatches, int ranks);

// The passes `op` of `rank` under a loop layout, grouped: micro-batches are cut into
// consecutive groups of `group_sizes` (which must sum to the layout's micro-batch count);
// for each group in turn, the rank's stages one after the other (ascending, or descending
// with `reverse_chunks`), each over the group's micro-batches in ascending order.
// One group of m gives breadth-first order: all micro-batches of a stage, then the next.
std::vector<Action> ChunkedOrder(const Layout& layout, int rank, Op op,
                                 const std::vector<int>& group_sizes, bool reverse_chunks);

// One-forward-one-backward merge: the first `warmup` forwards, then one forward and one
// backward alternately while forwards remain, then the remaining backwards. `warmup` is
// clamped to [0, forwards.size()]: 0 gives F B F B ..., forwards.size() gives all forwards
// then all backwards. Precondition: forwards.size() == backwards.size().
std::vector<Action> OneFOneBOrder(const std::vector<Action>& forwards,
                                  const std::vector<Action>& backwards, int warmup);

// Adds the weight pass W of every I in `order`: right after the k-th I (k from 0) comes
// the W of the (k - lag)-th I, so weight passes run `lag` input passes late; the last
// `lag` weight passes close the list. lag = 0 puts each W right after its I.
// Precondition: lag >= 0; `order` holds no W.
std::vector<Action> DeferWeightPasses(const std::vector<Action>& order, int lag);

}  // namespace conveyor

#endif  // CONVEYOR_SCHEDULE_BUILDERS_BUILDER_UTIL_H_
