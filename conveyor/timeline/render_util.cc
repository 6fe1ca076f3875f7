#include "conveyor/timeline/render_util.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "conveyor/common/error.h"

namespace conveyor {

void CheckTimeline(const Timeline& timeline) {
  CONVEYOR_CHECK(timeline.num_ranks >= 0)
      << "a timeline has a negative number of ranks: " << timeline.num_ranks;
  for (const Span& s : timeline.spans) {
    CONVEYOR_CHECK(s.rank >= 0 && s.rank < timeline.num_ranks)
        << "span " << s.action << " is on rank " << s.rank << ", outside [0, " << timeline.num_ranks
        << ")";
    CONVEYOR_CHECK(std::isfinite(s.start) && std::isfinite(s.end) && s.start <= s.end)
        << "span " << s.action << " on rank " << s.rank << " has bad times [" << s.start << ", "
        << s.end << ")";
  }
  for (const Phase& p : timeline.phases) {
    CONVEYOR_CHECK(p.rank >= 0 && p.rank < timeline.num_ranks && std::isfinite(p.start) &&
                   std::isfinite(p.end) && p.start <= p.end)
        << "phase '" << p.name << "' on rank " << p.rank << " has bad times [" << p.start << ", "
        << p.end << ") or a rank outside [0, " << timeline.num_ranks << ")";
  }
  for (const CounterSample& c : timeline.counters) {
    CONVEYOR_CHECK(c.rank >= 0 && c.rank < timeline.num_ranks && std::isfinite(c.time) &&
                   std::isfinite(c.value))
        << "counter '" << c.name << "' on rank " << c.rank << " has a bad sample (" << c.time
        << ", " << c.value << ")";
  }
}

std::vector<std::vector<const Span*>> ComputeSpansByRank(const Timeline& timeline) {
  CheckTimeline(timeline);
  std::vector<std::vector<const Span*>> rows(timeline.num_ranks);
  for (const Span& s : timeline.spans) {
    if (IsCompute(s.action.op)) rows[s.rank].push_back(&s);
  }
  for (auto& row : rows) {
    std::stable_sort(row.begin(), row.end(),
                     [](const Span* a, const Span* b) { return a->start < b->start; });
  }
  return rows;
}

double ShortestComputeSpan(const Timeline& timeline) {
  double shortest = 0;
  for (const Span& s : timeline.spans) {
    const double d = s.end - s.start;
    if (IsCompute(s.action.op) && d > 0 && (shortest == 0 || d < shortest)) shortest = d;
  }
  return shortest;
}

ChunkMap::ChunkMap(const Timeline& timeline) : stages_of_rank_(timeline.num_ranks) {
  for (const Span& s : timeline.spans) {
    if (IsCompute(s.action.op)) stages_of_rank_[s.rank].push_back(s.action.stage);
  }
  for (auto& stages : stages_of_rank_) {
    std::sort(stages.begin(), stages.end());
    stages.erase(std::unique(stages.begin(), stages.end()), stages.end());
  }
}

int ChunkMap::chunk(int rank, int stage) const {
  const auto& stages = stages_of_rank_[rank];
  return static_cast<int>(std::lower_bound(stages.begin(), stages.end(), stage) - stages.begin());
}

double NiceStep(double length, int parts) {
  const double raw = length / parts;
  const double base = std::pow(10.0, std::floor(std::log10(raw)));
  for (const double factor : {1.0, 2.0, 5.0}) {
    if (factor * base >= raw * (1 - 1e-9)) return factor * base;
  }
  return 10 * base;
}

std::string FormatNumber(double value, int digits) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.*g", digits, value);
  if (std::string(buffer).find('e') != std::string::npos) {
    std::snprintf(buffer, sizeof(buffer), "%.0f", value);
  }
  return buffer;
}

}  // namespace conveyor
