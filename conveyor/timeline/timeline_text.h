// A timeline's events as text, for sending one rank's measured step to another (conveyor
// train --trace gathers every rank's on rank 0). One event per line, every time exact to
// the last bit (17 significant digits):
//
//   S KIND START END ACTION      a span: KIND 0 run, 1 post, 2 wait; ACTION as 0F3, 1SEND_F2
//   P START END TRACK NAME       a phase: TRACK 0 step, 1 data parallel, 2 tensor parallel
//   C TIME VALUE NAME            a counter sample
//
// NAME runs to the end of the line (it may hold spaces, not a line break). The rank of each
// event is not written: the receiver knows whose text it reads.
//
// Thread-safety: pure functions.
#ifndef CONVEYOR_TIMELINE_TIMELINE_TEXT_H_
#define CONVEYOR_TIMELINE_TIMELINE_TEXT_H_

#include <string>

#include "conveyor/timeline/timeline.h"

namespace conveyor {

// `t`'s spans, phases and counters, one line each. Precondition (InternalError otherwise):
// no phase or counter name holds a line break.
std::string EncodeTimelineText(const Timeline& t);

// Appends the events of `text` (EncodeTimelineText of rank `rank`'s timeline) to `into`,
// each with rank `rank`. Checks every line before adding anything: an unknown line type, a
// missing or unreadable field, a kind or track out of range, a time that is not finite or
// an end before its start throws UserError naming `rank`, the line's number and the line;
// `into` is then unchanged.
void DecodeTimelineText(const std::string& text, int rank, Timeline& into);

}  // namespace conveyor

#endif  // CONVEYOR_TIMELINE_TIMELINE_TEXT_H_
