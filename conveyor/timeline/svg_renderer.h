// A timeline as a standalone SVG figure, drawn like the pipeline figures in papers.
//
// One row per rank (labelled "rank r") on a light background that shows idle time; a box per
// compute action coloured by kind (F, B, I, W, OVERLAP_F_B), a lighter shade for a rank's
// second (fourth, ...) stage so interleaved and V chunks stand apart; the micro-batch inside
// the box when it fits ("7/3" for an overlapped forward 7 and backward 3); a tooltip per box
// with the action and its times. SEND/RECV spans that take time are thin grey bands at the
// bottom of their row. Below the rows: a time axis and a legend; an optional title above.
//
// Size stays bounded: with more than kMaxSvgBoxes compute spans, each rank's row is drawn
// per pixel column instead (a column takes the colour of the kind that fills it, a neutral
// "mixed" colour when kinds alternate within it, or stays background when mostly idle),
// without labels or tooltips: at most (ranks * width) boxes, usually far fewer.
//
// Stateless and thread-safe.
#ifndef CONVEYOR_TIMELINE_SVG_RENDERER_H_
#define CONVEYOR_TIMELINE_SVG_RENDERER_H_

#include <string>

#include "conveyor/timeline/timeline.h"

namespace conveyor {

inline constexpr int kMaxSvgBoxes = 10000;

struct SvgOptions {
  std::string title;   // drawn above the rows when not empty (XML-escaped)
  int width = 0;       // pixels of the time axis; 0 = auto (about 24 px for the shortest
                       // action, within [400, 1600]); explicit values within [100, 10000]
  int row_height = 0;  // pixels per rank; 0 = auto (24, less beyond 32 ranks); else [4, 200]
  bool labels = true;  // micro-batch numbers inside the boxes that fit
};

// Throws UserError for options outside their ranges or a malformed timeline.
std::string RenderSvg(const Timeline& timeline, const SvgOptions& options = {});

}  // namespace conveyor

#endif  // CONVEYOR_TIMELINE_SVG_RENDERER_H_
