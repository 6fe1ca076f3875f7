#include "conveyor/timeline/timeline.h"

#include <algorithm>

#include "conveyor/common/error.h"

namespace conveyor {

std::string_view TimeUnitName(TimeUnit unit) {
  switch (unit) {
    case TimeUnit::kCostUnits:
      return "units";
    case TimeUnit::kSeconds:
      return "s";
  }
  CONVEYOR_ASSERT(false) << "unknown time unit " << static_cast<int>(unit);
}

std::string_view PhaseTrackName(PhaseTrack track) {
  switch (track) {
    case PhaseTrack::kStep:
      return "step";
    case PhaseTrack::kDataParallel:
      return "data parallel";
    case PhaseTrack::kTensorParallel:
      return "tensor parallel";
    case PhaseTrack::kExpertParallel:
      return "expert parallel";
  }
  CONVEYOR_ASSERT(false) << "unknown phase track " << static_cast<int>(track);
}

double Timeline::makespan() const {
  double end = 0;
  for (const Span& s : spans) end = std::max(end, s.end);
  for (const Phase& p : phases) end = std::max(end, p.end);
  return end;
}

std::string SpanName(const Span& span) {
  switch (span.kind) {
    case SpanKind::kPost:
      return "post " + span.action.ToString();
    case SpanKind::kWait:
      return "wait " + span.action.ToString();
    case SpanKind::kRun:
      break;
  }
  return span.action.ToString();
}

}  // namespace conveyor
