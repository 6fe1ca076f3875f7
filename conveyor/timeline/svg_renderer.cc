#include "conveyor/timeline/svg_renderer.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <vector>

#include "conveyor/common/error.h"
#include "conveyor/timeline/render_util.h"

namespace conveyor {
namespace {

struct KindStyle {
  const char* css_class;
  const char* dark;
  const char* light;
  const char* legend;
};

// Indexed by KindIndex().
constexpr KindStyle kKinds[] = {
    {"F", "#3b6fb6", "#9fbfe8", "forward (F)"},
    {"B", "#2e8b57", "#9fd8b4", "full backward (B)"},
    {"I", "#d9822b", "#f3c38f", "backward for inputs (I)"},
    {"W", "#7b5ea7", "#c6b5e3", "backward for weights (W)"},
    {"X", "#c0392b", "#eea59d", "overlapped F and B"},
};
constexpr const char* kMixedClass = "M";
constexpr const char* kCommClass = "C";

constexpr int kLeftMargin = 70;
constexpr int kRightMargin = 20;
constexpr int kLegendItemWidth = 190;

int KindIndex(Op op) {
  switch (op) {
    case Op::kForward:
      return 0;
    case Op::kBackward:
      return 1;
    case Op::kBackwardInput:
      return 2;
    case Op::kBackwardWeight:
      return 3;
    default:
      return 4;  // OVERLAP_F_B, the only other compute op
  }
}

std::string ClassOf(int kind, bool light) {
  return std::string(kKinds[kind].css_class) + (light ? "2" : "");
}

std::string XmlEscape(const std::string& text) {
  std::string out;
  for (const char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string Num(double value) { return FormatNumber(value, 7); }

std::string Rect(const std::string& css_class, double x, double y, double w, double h) {
  return "<rect class=\"" + css_class + "\" x=\"" + Num(x) + "\" y=\"" + Num(y) + "\" width=\"" +
         Num(w) + "\" height=\"" + Num(h) + "\"";
}

// Pixel geometry of the figure.
struct Frame {
  double scale;  // pixels per time unit
  int width;     // pixels of the time axis
  int row_height;
  int gap;
  int top;
  double x(double t) const { return kLeftMargin + t * scale; }
  int y(int rank) const { return top + rank * (row_height + gap); }
};

// What the drawing used, for the legend.
struct Used {
  std::set<int> kinds;
  bool light = false;
  bool mixed = false;
  bool comm = false;
};

// Draws spans one box each.
std::string ExactRows(const Timeline& timeline, const Frame& f, const SvgOptions& options,
                      const ChunkMap& chunks, Used& used) {
  std::string out;
  for (const Span& s : timeline.spans) {
    const double x = f.x(s.start), w = (s.end - s.start) * f.scale;
    const double y = f.y(s.rank);
    const std::string tip = "<title>" +
                            XmlEscape(SpanName(s) + " on rank " + std::to_string(s.rank) + ": " +
                                      Num(s.start) + " to " + Num(s.end)) +
                            "</title></rect>\n";
    if (IsComm(s.action.op) && s.end > s.start) {
      used.comm = true;
      out += Rect(kCommClass, x, y + f.row_height * 0.8, w, f.row_height * 0.2) + ">" + tip;
    }
    if (!IsCompute(s.action.op)) continue;
    const int kind = KindIndex(s.action.op);
    const bool light = chunks.chunk(s) % 2 == 1;
    used.kinds.insert(kind);
    used.light |= light;
    out += Rect(ClassOf(kind, light), x, y, w, f.row_height) + ">" + tip;
    const std::string label = s.action.op == Op::kOverlapFB
                                  ? std::to_string(s.action.microbatch) + "/" +
                                        std::to_string(s.action.overlap_microbatch)
                                  : std::to_string(s.action.microbatch);
    if (options.labels && f.row_height >= 12 && w >= 7.0 * label.size() + 4) {
      out += "<text class=\"" + std::string(light ? "t2" : "t") + "\" x=\"" + Num(x + w / 2) +
             "\" y=\"" + Num(y + f.row_height / 2.0 + 4) + "\">" + label + "</text>\n";
    }
  }
  return out;
}

// Draws each rank per pixel column (see the header): bounded by ranks * width boxes.
std::string DenseRows(const Timeline& timeline, const Frame& f, const ChunkMap& chunks,
                      Used& used) {
  constexpr int kIdle = -1, kMixed = -2;  // else kind * 2 + light
  const auto rows = ComputeSpansByRank(timeline);
  std::string out;
  for (int r = 0; r < timeline.num_ranks; ++r) {
    const auto& row = rows[r];
    std::vector<int> column_code(f.width, kIdle);
    size_t first = 0;
    for (int c = 0; c < f.width; ++c) {
      const double t0 = c / f.scale, t1 = (c + 1) / f.scale;
      while (first < row.size() && row[first]->end <= t0) ++first;
      double busy = 0;
      int code = kIdle;
      for (size_t k = first; k < row.size() && row[k]->start < t1; ++k) {
        busy += std::min(row[k]->end, t1) - std::max(row[k]->start, t0);
        const int this_code = KindIndex(row[k]->action.op) * 2 + chunks.chunk(*row[k]) % 2;
        code = code == kIdle || code == this_code ? this_code : kMixed;
      }
      if (busy >= 0.5 * (t1 - t0)) column_code[c] = code;
    }
    for (int c = 0; c < f.width;) {
      int end = c + 1;
      while (end < f.width && column_code[end] == column_code[c]) ++end;
      const int code = column_code[c];
      if (code == kMixed) {
        used.mixed = true;
        out += Rect(kMixedClass, kLeftMargin + c, f.y(r), end - c, f.row_height) + "/>\n";
      } else if (code != kIdle) {
        used.kinds.insert(code / 2);
        used.light |= code % 2 == 1;
        out +=
            Rect(ClassOf(code / 2, code % 2 == 1), kLeftMargin + c, f.y(r), end - c, f.row_height) +
            "/>\n";
      }
      c = end;
    }
  }
  return out;
}

std::string Axis(const Timeline& timeline, const Frame& f, double makespan, int y) {
  std::string out = "<line class=\"axis\" x1=\"" + Num(f.x(0)) + "\" y1=\"" + Num(y) + "\" x2=\"" +
                    Num(f.x(0) + f.width) + "\" y2=\"" + Num(y) + "\"/>\n";
  if (makespan > 0) {
    const double step = NiceStep(makespan, 10);
    for (int i = 0; i * step <= makespan * (1 + 1e-9); ++i) {
      const double x = f.x(i * step);
      out += "<line class=\"axis\" x1=\"" + Num(x) + "\" y1=\"" + Num(y) + "\" x2=\"" + Num(x) +
             "\" y2=\"" + Num(y + 4) + "\"/>\n";
      out += "<text class=\"tick\" x=\"" + Num(x) + "\" y=\"" + Num(y + 15) + "\">" +
             FormatNumber(i * step) + "</text>\n";
    }
  }
  out += "<text class=\"tick\" x=\"" + Num(f.x(0) + f.width / 2.0) + "\" y=\"" + Num(y + 30) +
         "\">time (" + std::string(TimeUnitName(timeline.time_unit)) + ")</text>\n";
  return out;
}

std::string Legend(const Used& used, int y, int total_width, int* height) {
  std::vector<std::pair<std::string, std::string>> items;  // css class, text
  for (const int k : used.kinds) items.push_back({kKinds[k].css_class, kKinds[k].legend});
  if (used.light) items.push_back({"F2", "lighter: a rank's 2nd chunk"});
  if (used.mixed) items.push_back({kMixedClass, "kinds mixed within a pixel"});
  if (used.comm) items.push_back({kCommClass, "SEND / RECV"});
  items.push_back({"bg", "idle"});
  const int per_line = std::max(1, (total_width - kLeftMargin) / kLegendItemWidth);
  std::string out = "<g class=\"legend\">\n";
  for (size_t i = 0; i < items.size(); ++i) {
    const int x = kLeftMargin + static_cast<int>(i % per_line) * kLegendItemWidth;
    const int item_y = y + static_cast<int>(i / per_line) * 18;
    out += Rect(items[i].first, x, item_y, 12, 12) + "/>\n";
    out += "<text class=\"key\" x=\"" + Num(x + 16) + "\" y=\"" + Num(item_y + 10) + "\">" +
           XmlEscape(items[i].second) + "</text>\n";
  }
  *height = static_cast<int>((items.size() + per_line - 1) / per_line) * 18;
  return out + "</g>\n";
}

std::string Style() {
  std::string css =
      "text{font-family:sans-serif}.rank{font-size:12px;text-anchor:end}"
      ".t,.t2{font-size:10px;text-anchor:middle}.t{fill:#fff}.t2{fill:#000}"
      ".tick{font-size:10px;text-anchor:middle}.key{font-size:11px}"
      ".title{font-size:15px;font-weight:bold}.axis{stroke:#444}"
      ".bg{fill:#eeeeee}.M{fill:#777777}.C{fill:#999999}";
  for (const KindStyle& k : kKinds) {
    css += std::string(".") + k.css_class + "{fill:" + k.dark + "}." + k.css_class +
           "2{fill:" + k.light + "}";
  }
  return css;
}

}  // namespace

std::string RenderSvg(const Timeline& timeline, const SvgOptions& options) {
  CheckTimeline(timeline);
  CONVEYOR_CHECK(options.width == 0 || (options.width >= 100 && options.width <= 10000))
      << "SVG width " << options.width << " must be 0 (auto) or within [100, 10000]";
  CONVEYOR_CHECK(options.row_height == 0 || (options.row_height >= 4 && options.row_height <= 200))
      << "SVG row height " << options.row_height << " must be 0 (auto) or within [4, 200]";
  const int p = timeline.num_ranks;
  const double makespan = timeline.makespan();

  Frame f;
  if (options.width > 0) {
    f.width = options.width;
  } else {
    const double shortest = ShortestComputeSpan(timeline);
    const double wanted = shortest > 0 ? 24 * makespan / shortest : 400;
    f.width = static_cast<int>(std::clamp(std::ceil(wanted), 400.0, 1600.0));
    // Room for the title (bold 15 px: up to about 10 px a character).
    f.width = std::max(f.width, static_cast<int>(10 * options.title.size()) - kLeftMargin);
  }
  f.scale = makespan > 0 ? f.width / makespan : 0;
  f.row_height = options.row_height > 0 ? options.row_height
                                        : (p <= 32 ? 24 : std::max(4, 768 / std::max(p, 1)));
  f.gap = std::max(2, f.row_height / 4);
  f.top = options.title.empty() ? 10 : 36;

  std::string body;
  for (int r = 0; r < p; ++r) {
    body += "<text class=\"rank\" x=\"" + Num(kLeftMargin - 8) + "\" y=\"" +
            Num(f.y(r) + f.row_height / 2.0 + 4) + "\">rank " + std::to_string(r) + "</text>\n";
    body += Rect("bg", kLeftMargin, f.y(r), f.width, f.row_height) + "/>\n";
  }
  const ChunkMap chunks(timeline);
  Used used;
  size_t compute_spans = 0;
  for (const Span& s : timeline.spans) compute_spans += IsCompute(s.action.op);
  body += "<g class=\"spans\">\n";
  body += compute_spans <= kMaxSvgBoxes ? ExactRows(timeline, f, options, chunks, used)
                                        : DenseRows(timeline, f, chunks, used);
  body += "</g>\n";
  const int axis_y = f.y(p) + 2;
  body += Axis(timeline, f, makespan, axis_y);
  const int total_width = kLeftMargin + f.width + kRightMargin;
  int legend_height = 0;
  body += Legend(used, axis_y + 44, total_width, &legend_height);
  const int total_height = axis_y + 44 + legend_height + 10;

  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(total_width) +
         "\" height=\"" + std::to_string(total_height) + "\" viewBox=\"0 0 " +
         std::to_string(total_width) + " " + std::to_string(total_height) + "\">\n";
  out += "<style>" + Style() + "</style>\n";
  out += "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n";
  if (!options.title.empty()) {
    out += "<text class=\"title\" x=\"" + Num(kLeftMargin) + "\" y=\"22\">" +
           XmlEscape(options.title) + "</text>\n";
  }
  return out + body + "</svg>\n";
}

}  // namespace conveyor
