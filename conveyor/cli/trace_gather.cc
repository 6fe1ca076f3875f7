#include "conveyor/cli/trace_gather.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <limits>
#include <sstream>
#include <vector>

#include "conveyor/cli/output.h"
#include "conveyor/timeline/chrome_trace.h"
#include "conveyor/timeline/svg_renderer.h"

namespace conveyor {
namespace {

// One line per span, phase and counter sample of `t`, exact to the last bit of each time.
std::string TimelineText(const Timeline& t) {
  std::ostringstream out;
  out.precision(17);
  for (const Span& s : t.spans) {
    out << "S " << static_cast<int>(s.kind) << " " << s.start << " " << s.end << " " << s.action
        << "\n";
  }
  for (const Phase& p : t.phases) {
    out << "P " << p.start << " " << p.end << " " << static_cast<int>(p.track) << " " << p.name
        << "\n";
  }
  for (const CounterSample& c : t.counters) {
    out << "C " << c.time << " " << c.value << " " << c.name << "\n";
  }
  return out.str();
}

// Adds the events in `text` (TimelineText of rank `rank`'s timeline) to `into`.
void ParseTimelineText(const std::string& text, int rank, Timeline& into) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line.substr(2));
    if (line[0] == 'S') {
      Span s;
      int kind = 0;
      std::string action;
      fields >> kind >> s.start >> s.end >> action;
      s.rank = rank;
      s.kind = static_cast<SpanKind>(kind);
      s.action = ParseAction(action);
      into.spans.push_back(s);
    } else {
      double a = 0, b = 0;
      int track = 0;
      std::string name;
      fields >> a >> b;
      if (line[0] == 'P') fields >> track;
      fields >> std::ws;
      std::getline(fields, name);
      if (line[0] == 'P') {
        into.phases.push_back(Phase{rank, name, a, b, static_cast<PhaseTrack>(track)});
      }
      if (line[0] == 'C') into.counters.push_back(CounterSample{rank, name, a, b});
    }
  }
}

// Every rank's `text`, in rank order: the lengths are gathered first, then the bytes padded
// to the longest. Collective.
std::vector<std::string> GatherTexts(Transport& transport, const std::string& text) {
  const std::vector<at::Tensor> lengths =
      transport.AllGather(at::tensor({static_cast<int64_t>(text.size())}, at::kLong));
  int64_t longest = 1;  // no empty tensor travels
  for (const at::Tensor& length : lengths) longest = std::max(longest, length.item<int64_t>());
  at::Tensor mine = at::zeros({longest}, at::kByte);
  std::memcpy(mine.data_ptr<uint8_t>(), text.data(), text.size());
  const std::vector<at::Tensor> all = transport.AllGather(mine);
  std::vector<std::string> texts;
  for (size_t r = 0; r < all.size(); ++r) {
    texts.emplace_back(reinterpret_cast<const char*>(all[r].data_ptr<uint8_t>()),
                       static_cast<size_t>(lengths[r].item<int64_t>()));
  }
  return texts;
}

// Moves every event of `t` so that its earliest span or counter sample is at 0.
void StartAtZero(Timeline& t) {
  double zero = std::numeric_limits<double>::infinity();
  for (const Span& s : t.spans) zero = std::min(zero, s.start);
  for (const CounterSample& c : t.counters) zero = std::min(zero, c.time);
  for (Span& s : t.spans) s.start -= zero, s.end -= zero;
  for (Phase& p : t.phases) p.start -= zero, p.end -= zero;
  for (CounterSample& c : t.counters) c.time -= zero;
}

}  // namespace

void WriteTraces(const std::string& dir, const Timeline& mine, const Timeline& predicted,
                 Transport& transport) {
  const std::vector<std::string> texts = GatherTexts(transport, TimelineText(mine));
  if (transport.rank() != 0) return;
  std::filesystem::create_directories(dir);
  Timeline measured;
  measured.num_ranks = mine.num_ranks;
  measured.time_unit = TimeUnit::kSeconds;
  for (int r = 0; r < static_cast<int>(texts.size()); ++r) {
    Timeline rank;
    rank.num_ranks = mine.num_ranks;
    rank.time_unit = mine.time_unit;
    ParseTimelineText(texts[r], r, rank);
    const std::string name = std::to_string(r);
    WriteOutput(dir + "/rank-" + name + ".json", RenderChromeTrace(rank, "rank " + name));
    measured.spans.insert(measured.spans.end(), rank.spans.begin(), rank.spans.end());
    measured.phases.insert(measured.phases.end(), rank.phases.begin(), rank.phases.end());
    measured.counters.insert(measured.counters.end(), rank.counters.begin(), rank.counters.end());
  }
  StartAtZero(measured);
  WriteOutput(dir + "/trace.json",
              RenderChromeTrace({{"measured", &measured}, {"predicted", &predicted}}));
  WriteOutput(dir + "/measured.svg",
              RenderSvg(measured, SvgOptions{.title = "measured, last step"}));
  WriteOutput(dir + "/predicted.svg",
              RenderSvg(predicted, SvgOptions{.title = "predicted from measured costs"}));
}

}  // namespace conveyor
