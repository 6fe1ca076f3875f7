// Test helpers: timelines written by hand, and a big one for size bounds.
#ifndef CONVEYOR_TIMELINE_TIMELINE_TESTING_H_
#define CONVEYOR_TIMELINE_TIMELINE_TESTING_H_

#include <string>
#include <vector>

#include "conveyor/timeline/timeline.h"

namespace conveyor {

struct SpanText {
  int rank;
  std::string action;  // text form, e.g. "0F1"
  double start;
  double end;
};

inline Timeline MakeTimeline(int ranks, const std::vector<SpanText>& spans) {
  Timeline timeline;
  timeline.num_ranks = ranks;
  for (const SpanText& s : spans) {
    timeline.spans.push_back(Span{s.rank, ParseAction(s.action), s.start, s.end});
  }
  return timeline;
}

// GPipe on `ranks` ranks with `microbatches` micro-batches, F = 1 and B = 2, no gaps beyond
// the fill and drain: rank r runs F(i) at r + i and B(i) after all forwards.
inline Timeline GpipeTimeline(int ranks, int microbatches) {
  Timeline timeline;
  timeline.num_ranks = ranks;
  const int m = microbatches, p = ranks;
  for (int r = 0; r < p; ++r) {
    for (int i = 0; i < m; ++i) {
      timeline.spans.push_back(
          Span{r, Action{Op::kForward, r, i}, double(r + i), double(r + i + 1)});
      const double b_start = (m + p - 1) + 2.0 * (p - 1 - r) + 2.0 * i;
      timeline.spans.push_back(Span{r, Action{Op::kBackward, r, i}, b_start, b_start + 2});
    }
  }
  return timeline;
}

}  // namespace conveyor

#endif  // CONVEYOR_TIMELINE_TIMELINE_TESTING_H_
