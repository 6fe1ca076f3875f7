#include "conveyor/schedule/pipeline_limits.h"

#include "conveyor/common/error.h"
#include "conveyor/common/range_check.h"
#include "conveyor/schedule/registry.h"

namespace conveyor {
namespace {

void CheckProduct(int64_t stages, int64_t microbatches, std::string_view what) {
  CONVEYOR_CHECK(stages * microbatches <= kMaxStageMicrobatches)
      << what << ": " << stages << " stages x " << microbatches
      << " micro-batches = " << stages * microbatches << " stage micro-batches, above the limit of "
      << kMaxStageMicrobatches << " (planning time and memory grow with it)";
}

}  // namespace

ScheduleOptions CheckScheduleOptions(int64_t pp, int64_t microbatches, int64_t chunks) {
  CheckInRange("--pp", pp, 1, kMaxRanks);
  CheckInRange("--microbatches", microbatches, 1, kMaxMicrobatches);
  CheckInRange("--chunks", chunks, 0, kMaxChunks);
  return ScheduleOptions{static_cast<int>(pp), static_cast<int>(microbatches),
                         static_cast<int>(chunks)};
}

void CheckPipelineSize(std::string_view schedule, const ScheduleOptions& options) {
  CheckScheduleOptions(options.pp, options.microbatches, options.chunks);
  const int chunks = options.chunks > 0 ? options.chunks : FindSchedule(schedule).default_chunks;
  CheckProduct(int64_t{options.pp} * chunks, options.microbatches,
               "--pp " + std::to_string(options.pp) + " with " + std::to_string(chunks) +
                   " stage(s) per rank and --microbatches " + std::to_string(options.microbatches));
}

void CheckProgramSize(int64_t ranks, int64_t stages, int64_t microbatches) {
  CheckInRange("ranks (lines)", ranks, 1, kMaxRanks);
  CheckInRange("stages (largest stage number + 1)", stages, 1, int64_t{kMaxRanks} * kMaxChunks);
  CheckInRange("micro-batches (largest micro-batch number + 1)", microbatches, 1, kMaxMicrobatches);
  CheckProduct(stages, microbatches, "the program");
}

}  // namespace conveyor
