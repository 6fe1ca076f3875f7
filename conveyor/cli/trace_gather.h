// `conveyor train --trace DIR`: every rank's measured timeline of the last step, gathered on
// rank 0 and merged there with the simulator's prediction of the same step.
#ifndef CONVEYOR_CLI_TRACE_GATHER_H_
#define CONVEYOR_CLI_TRACE_GATHER_H_

#include <string>

#include "conveyor/comm/transport.h"
#include "conveyor/timeline/timeline.h"

namespace conveyor {

// Gathers every rank's `mine` (its spans, phases and counters, seconds since a clock origin
// all ranks share: SharedClockOrigin) on rank 0 through transport.AllGather; rank 0 then
// writes into DIR (created when missing): rank-R.json for every rank R (that rank's timeline
// as a Chrome trace), trace.json (Chrome / Perfetto, groups "measured" and "predicted", both
// starting at 0), measured.svg and predicted.svg. The other ranks write nothing, so DIR need
// not be visible to them. Every rank's `mine` covers mine.num_ranks ranks. Collective over
// `transport`; throws UserError on rank 0 when a file cannot be written.
void WriteTraces(const std::string& dir, const Timeline& mine, const Timeline& predicted,
                 Transport& transport);

}  // namespace conveyor

#endif  // CONVEYOR_CLI_TRACE_GATHER_H_
