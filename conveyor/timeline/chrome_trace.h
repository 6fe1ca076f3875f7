// Timelines as Chrome trace-event JSON, for chrome://tracing and Perfetto (ui.perfetto.dev).
//
// {"traceEvents": [...], "displayTimeUnit": "ms"}: one complete event ("ph": "X") per span,
// named by the action's text ("0F3", "1SEND_F0", "(0F7;7B3)OVERLAP_F_B"), with args stage,
// microbatch (absent for REDUCE_GRAD), op and, for OVERLAP_F_B, backward (the backward half's
// text). Each rank of each timeline is a process (pid), named "<group>: rank r" and sorted in
// order; compute runs on thread 0 ("compute"), SEND/RECV on thread 1 ("comm"), where measured
// posts and waits are named "post 1SEND_F3" / "wait 1RECV_F3" (category "post" / "wait").
// Phases are complete events on thread 2 ("step"); counter samples are counter events
// ("ph": "C") of the rank's process, args {"value": v}.
//
// Several timelines (e.g. "predicted" and "measured") go into one trace as separate process
// groups, numbered one after the other. Times are in microseconds: seconds convert exactly;
// the simulator's cost units count 1 unit as 1000 us, so a unit reads as a millisecond.
//
// Stateless and thread-safe.
#ifndef CONVEYOR_TIMELINE_CHROME_TRACE_H_
#define CONVEYOR_TIMELINE_CHROME_TRACE_H_

#include <string>
#include <vector>

#include "conveyor/timeline/timeline.h"

namespace conveyor {

struct TraceGroup {
  std::string name;          // e.g. "predicted"; JSON-escaped on output
  const Timeline* timeline;  // not owned; must outlive the call
};

// Throws UserError for a null or malformed timeline (see CheckTimeline).
std::string RenderChromeTrace(const std::vector<TraceGroup>& groups);

// One timeline as one group.
std::string RenderChromeTrace(const Timeline& timeline, const std::string& name = "predicted");

}  // namespace conveyor

#endif  // CONVEYOR_TIMELINE_CHROME_TRACE_H_
