#include "conveyor/schedule/layout.h"

#include <algorithm>
#include <sstream>

#include "conveyor/common/error.h"

namespace conveyor {
namespace {

void CheckBasics(int ranks, int microbatches) {
  CONVEYOR_CHECK(ranks >= 1) << "the number of pipeline ranks must be at least 1, got " << ranks;
  CONVEYOR_CHECK(microbatches >= 1)
      << "the number of micro-batches must be at least 1, got " << microbatches;
}

std::vector<int> VMap(int ranks) {
  std::vector<int> map(2 * ranks);
  for (int r = 0; r < ranks; ++r) {
    map[r] = r;
    map[2 * ranks - 1 - r] = r;
  }
  return map;
}

}  // namespace

Layout::Layout(int ranks, std::vector<int> stage_to_rank, int microbatches, int directions,
               Placement placement)
    : num_ranks_(ranks),
      num_microbatches_(microbatches),
      directions_(directions),
      placement_(placement),
      stage_to_rank_(std::move(stage_to_rank)),
      rank_to_stages_(ranks) {
  CONVEYOR_CHECK(directions == 1 || directions == 2)
      << "a layout has 1 or 2 pipeline directions, got " << directions;
  CONVEYOR_CHECK(!stage_to_rank_.empty() &&
                 static_cast<int>(stage_to_rank_.size()) % directions == 0)
      << stage_to_rank_.size() << " stages cannot form " << directions << " equal pipelines";
  for (int s = 0; s < num_stages(); ++s) {
    const int r = stage_to_rank_[s];
    CONVEYOR_CHECK(r >= 0 && r < ranks)
        << "stage " << s << " is placed on rank " << r << ", outside [0, " << ranks << ")";
    rank_to_stages_[r].push_back(s);
  }
  for (int r = 0; r < ranks; ++r) {
    CONVEYOR_CHECK(!rank_to_stages_[r].empty()) << "rank " << r << " holds no stage";
  }
}

Layout Layout::Loop(int ranks, int chunks_per_rank, int microbatches) {
  CheckBasics(ranks, microbatches);
  CONVEYOR_CHECK(chunks_per_rank >= 1)
      << "chunks (stages) per rank must be at least 1, got " << chunks_per_rank;
  std::vector<int> map(ranks * chunks_per_rank);
  for (int s = 0; s < static_cast<int>(map.size()); ++s) map[s] = s % ranks;
  return Layout(ranks, std::move(map), microbatches, 1, Placement::kLoop);
}

Layout Layout::V(int ranks, int microbatches) {
  CheckBasics(ranks, microbatches);
  return Layout(ranks, VMap(ranks), microbatches, 1, Placement::kV);
}

Layout Layout::Dual(int ranks, int microbatches) {
  CheckBasics(ranks, microbatches);
  CONVEYOR_CHECK(microbatches >= 2)
      << "two pipeline directions need at least 2 micro-batches, got " << microbatches;
  return Layout(ranks, VMap(ranks), microbatches, 2, Placement::kDual);
}

Layout Layout::Custom(int ranks, std::vector<int> stage_to_rank, int microbatches, int directions) {
  CheckBasics(ranks, microbatches);
  return Layout(ranks, std::move(stage_to_rank), microbatches, directions, Placement::kCustom);
}

int Layout::chunks_per_rank() const {
  size_t most = 0;
  for (const auto& stages : rank_to_stages_) most = std::max(most, stages.size());
  return static_cast<int>(most);
}

int Layout::first_microbatch(int stage) const {
  if (directions_ == 1 || pipeline_of(stage) == 0) return 0;
  return (num_microbatches_ + 1) / 2;
}

int Layout::end_microbatch(int stage) const {
  if (directions_ == 1 || pipeline_of(stage) == 1) return num_microbatches_;
  return (num_microbatches_ + 1) / 2;
}

std::string Layout::Describe() const {
  static constexpr const char* kNames[] = {"loop", "V", "dual", "custom"};
  std::ostringstream out;
  out << num_ranks_ << " ranks, " << num_stages() << " stages (" << kNames[int(placement_)]
      << " placement" << (directions_ == 2 ? ", two directions" : "") << "), " << num_microbatches_
      << " micro-batches";
  return out.str();
}

}  // namespace conveyor
