#include "conveyor/cli/trace_gather.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <limits>
#include <vector>

#include "conveyor/cli/output.h"
#include "conveyor/timeline/chrome_trace.h"
#include "conveyor/timeline/svg_renderer.h"
#include "conveyor/timeline/timeline_text.h"

namespace conveyor {
namespace {

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
  const std::vector<std::string> texts = GatherTexts(transport, EncodeTimelineText(mine));
  if (transport.rank() != 0) return;
  std::filesystem::create_directories(dir);
  Timeline measured;
  measured.num_ranks = mine.num_ranks;
  measured.time_unit = TimeUnit::kSeconds;
  for (int r = 0; r < static_cast<int>(texts.size()); ++r) {
    Timeline rank;
    rank.num_ranks = mine.num_ranks;
    rank.time_unit = mine.time_unit;
    DecodeTimelineText(texts[r], r, rank);
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
