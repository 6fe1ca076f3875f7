// A timeline as plain text for terminals and logs.
//
// One line per rank ("rank 0 |...|"), time running left to right, scaled so the whole
// timeline fits the width. Each compute action is a run of characters that starts with its
// label and is filled with '-': "F3--" forward of micro-batch 3, "B3" full backward, "I3"
// backward for inputs, "W3" backward for weights, "F7+B3" an overlapped forward 7 and
// backward 3. A run too short for its label shows only the kind letter (F, B, I, W, or X for
// an overlapped unit). A column shows the action running at its middle; '.' is idle.
// SEND/RECV spans are not drawn. Below the rows: a time axis, the scale and a legend.
//
// Stateless and thread-safe.
#ifndef CONVEYOR_TIMELINE_ASCII_RENDERER_H_
#define CONVEYOR_TIMELINE_ASCII_RENDERER_H_

#include <string>

#include "conveyor/timeline/timeline.h"

namespace conveyor {

// `width`: characters per line, rank label included; 0 = auto (about 3 characters for the
// shortest action, at most 100). Explicit widths must leave at least 10 columns of time and
// be at most 1000, so the output stays small (about width * (ranks + 4) bytes). Throws
// UserError for a bad width or a malformed timeline (see CheckTimeline).
std::string RenderAscii(const Timeline& timeline, int width = 0);

}  // namespace conveyor

#endif  // CONVEYOR_TIMELINE_ASCII_RENDERER_H_
