#include "conveyor/timeline/ascii_renderer.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "conveyor/common/error.h"
#include "conveyor/timeline/render_util.h"

namespace conveyor {
namespace {

constexpr int kAutoMaxWidth = 100;
constexpr int kMaxWidth = 1000;
constexpr int kMinColumns = 10;
constexpr int kCharsPerShortestAction = 3;

// Upper case for a rank's even chunks, lower case for its odd ones.
char KindLetter(const Action& a, bool odd_chunk) {
  char letter;
  switch (a.op) {
    case Op::kForward:
      letter = 'F';
      break;
    case Op::kBackward:
      letter = 'B';
      break;
    case Op::kBackwardInput:
      letter = 'I';
      break;
    case Op::kBackwardWeight:
      letter = 'W';
      break;
    default:
      letter = 'X';  // OVERLAP_F_B, the only other compute op
  }
  return odd_chunk ? static_cast<char>(std::tolower(letter)) : letter;
}

// "F3", or "F3+b5" for an overlapped unit: each half in the case of its own chunk.
std::string Label(const Action& a, int rank, const ChunkMap& chunks) {
  if (a.op == Op::kOverlapFB) {
    return Label(a.ForwardHalf(), rank, chunks) + "+" + Label(a.BackwardHalf(), rank, chunks);
  }
  return KindLetter(a, chunks.chunk(rank, a.stage) % 2 == 1) + std::to_string(a.microbatch);
}

// For each of `columns` equal slices of [0, end), the span of `row` (sorted by start)
// running at the slice's middle, or nullptr.
std::vector<const Span*> Sample(const std::vector<const Span*>& row, int columns, double end) {
  std::vector<const Span*> sampled(columns, nullptr);
  size_t j = 0;
  for (int c = 0; c < columns && end > 0; ++c) {
    const double t = (c + 0.5) * end / columns;
    while (j < row.size() && row[j]->end <= t) ++j;
    if (j < row.size() && row[j]->start <= t) sampled[c] = row[j];
  }
  return sampled;
}

std::string RenderRow(const std::vector<const Span*>& sampled, const ChunkMap& chunks) {
  std::string line(sampled.size(), '.');
  for (size_t c = 0; c < sampled.size();) {
    size_t run_end = c + 1;
    while (run_end < sampled.size() && sampled[run_end] == sampled[c]) ++run_end;
    if (sampled[c] != nullptr) {
      const Action& action = sampled[c]->action;
      const bool odd_chunk = chunks.chunk(*sampled[c]) % 2 == 1;
      std::string text = Label(action, sampled[c]->rank, chunks);
      if (text.size() > run_end - c) text = std::string(1, KindLetter(action, odd_chunk));
      text.resize(run_end - c, '-');
      line.replace(c, text.size(), text);
    }
    c = run_end;
  }
  return line;
}

// Round times under the columns where they fall, each where it fits.
std::string Axis(int columns, double makespan) {
  std::string axis(columns + 12, ' ');
  if (makespan <= 0) return "0";
  const double step = NiceStep(makespan, std::max(1, columns / 10));
  int free_from = 0;
  for (int i = 0; i * step <= makespan * (1 + 1e-9); ++i) {
    const int c = static_cast<int>(std::lround(i * step / makespan * columns));
    const std::string label = FormatNumber(i * step);
    if (c < free_from || c + label.size() > axis.size()) continue;
    axis.replace(c, label.size(), label);
    free_from = c + static_cast<int>(label.size()) + 1;
  }
  axis.erase(axis.find_last_not_of(' ') + 1);
  return axis;
}

}  // namespace

std::string RenderAscii(const Timeline& timeline, int width) {
  const auto rows = ComputeSpansByRank(timeline);
  const ChunkMap chunks(timeline);
  const int label_width = static_cast<int>(
      std::to_string(std::max(0, timeline.num_ranks - 1)).size() + std::string("rank  |").size());
  const double makespan = timeline.makespan();
  int columns;
  if (width == 0) {
    const double shortest = ShortestComputeSpan(timeline);
    const double wanted =
        shortest > 0 ? std::ceil(kCharsPerShortestAction * makespan / shortest) : kMinColumns;
    columns = static_cast<int>(std::clamp(wanted, double{kMinColumns},
                                          static_cast<double>(kAutoMaxWidth - label_width - 1)));
  } else {
    columns = width - label_width - 1;
    CONVEYOR_CHECK(columns >= kMinColumns && width <= kMaxWidth)
        << "ASCII width " << width << " must be in [" << label_width + 1 + kMinColumns << ", "
        << kMaxWidth << "] for " << timeline.num_ranks << " ranks";
  }
  const double time_per_column = makespan / columns;

  std::string out;
  for (int r = 0; r < timeline.num_ranks; ++r) {
    std::string label = "rank " + std::to_string(r);
    label.resize(label_width - 2, ' ');
    out += label + " |" + RenderRow(Sample(rows[r], columns, makespan), chunks) + "|\n";
  }
  out += std::string(label_width, ' ') + Axis(columns, makespan) + "\n";
  out += "time in " + std::string(TimeUnitName(timeline.time_unit)) +
         ", 1 column = " + FormatNumber(time_per_column, 3) + ", makespan " +
         FormatNumber(makespan) + "\n";
  out +=
      "legend: F<mb> forward, B<mb> full backward, I<mb> backward for inputs, W<mb> backward "
      "for weights, F<a>+B<b> overlapped (X when narrow), lower case: a rank's 2nd chunk, '.' "
      "idle\n";
  return out;
}

}  // namespace conveyor
