// The largest pipelines conveyor builds, loads, plans or runs. The limits are far above
// any real run and low enough that planning at them stays fast (a few seconds; the
// "Limits" section of docs/TRAINING.md has the measurements). A size above them is almost
// always a typo, which would otherwise mean minutes of planning or a huge allocation.
//
// Thread-safety: no state; safe from any thread.
#ifndef CONVEYOR_SCHEDULE_PIPELINE_LIMITS_H_
#define CONVEYOR_SCHEDULE_PIPELINE_LIMITS_H_

#include <cstdint>
#include <string_view>

#include "conveyor/schedule/schedule_options.h"

namespace conveyor {

inline constexpr int kMaxRanks = 4096;          // p: pipeline ranks
inline constexpr int kMaxChunks = 64;           // v: stages per rank
inline constexpr int kMaxMicrobatches = 65536;  // m: micro-batches per step
// Stages x micro-batches: the actions of a program, its planning time and its memory grow
// with it.
inline constexpr int64_t kMaxStageMicrobatches = int64_t{1} << 18;

// The options p, m, v give after checking each within its limit, named as the flags --pp,
// --microbatches and --chunks (64-bit values, so that a flag's 4294967298 is refused rather
// than wrapped). Throws UserError naming the first value out of range.
ScheduleOptions CheckScheduleOptions(int64_t pp, int64_t microbatches, int64_t chunks);

// Checks the size of the schedule `schedule` would build from `options` (chunks = 0: the
// schedule's default): CheckScheduleOptions, then stages x micro-batches within
// kMaxStageMicrobatches. Throws UserError naming the first value out of range and its
// limit; an unknown schedule name gives FindSchedule's error.
void CheckPipelineSize(std::string_view schedule, const ScheduleOptions& options);

// Checks the shape of a program read from a file: `ranks`, `stages` and `microbatches`
// within their limits (stages up to kMaxRanks x kMaxChunks), and stages x micro-batches
// within kMaxStageMicrobatches. Throws UserError naming what is too large and the limit.
void CheckProgramSize(int64_t ranks, int64_t stages, int64_t microbatches);

}  // namespace conveyor

#endif  // CONVEYOR_SCHEDULE_PIPELINE_LIMITS_H_
