#include "conveyor/sim/compute_sharing.h"

#include <algorithm>
#include <map>
#include <sstream>

#include "conveyor/common/error.h"

namespace conveyor {
namespace {

// How many ranks each device holds.
std::vector<int> RanksOn(const ComputeSharing& sharing) {
  std::vector<int> ranks(sharing.capacity.size(), 0);
  for (int d : sharing.device) ++ranks[d];
  return ranks;
}

}  // namespace

ComputeSharing ComputeSharing::OneDevice(int ranks, double capacity) {
  return ComputeSharing{std::vector<int>(ranks, 0), {capacity}, {}};
}

bool ComputeSharing::Shares() const {
  const std::vector<int> ranks = RanksOn(*this);
  for (size_t d = 0; d < capacity.size(); ++d) {
    for (int k = 1; k <= ranks[d]; ++k) {  // without a measured curve: k > capacity
      if (Rate(static_cast<int>(d), k) < 1) return true;
    }
  }
  return false;
}

double ComputeSharing::Rate(int device_index, int busy) const {
  const size_t d = static_cast<size_t>(device_index);
  if (d < busy_capacity.size() && !busy_capacity[d].empty() && busy >= 1) {
    const std::vector<double>& by_busy = busy_capacity[d];
    return by_busy[std::min<size_t>(busy, by_busy.size()) - 1] / busy;
  }
  const double c = capacity[d];
  return busy <= c ? 1.0 : c / busy;
}

double ComputeSharing::Room(int ranks) const {
  if (device.empty()) return ranks;
  const std::vector<int> on = RanksOn(*this);
  double room = 0;
  for (size_t d = 0; d < capacity.size(); ++d) room += std::min<double>(on[d], capacity[d]);
  return room;
}

std::string ComputeSharing::Describe() const {
  const std::vector<int> ranks = RanksOn(*this);
  std::ostringstream out;
  for (size_t d = 0; d < capacity.size(); ++d) {
    if (ranks[d] <= capacity[d]) continue;
    if (out.tellp() > 0) out << "; ";
    out << ranks[d] << " ranks, room for " << capacity[d] << " at full speed";
  }
  return out.str();
}

void CheckSharing(const ComputeSharing& sharing, int ranks) {
  CONVEYOR_CHECK(sharing.device.empty() || static_cast<int>(sharing.device.size()) == ranks)
      << "compute sharing names a device for " << sharing.device.size() << " ranks, not " << ranks;
  for (int d : sharing.device) {
    CONVEYOR_CHECK(d >= 0 && d < static_cast<int>(sharing.capacity.size()))
        << "compute sharing: device " << d << " of " << sharing.capacity.size();
  }
  for (double c : sharing.capacity) {
    CONVEYOR_CHECK(c > 0) << "compute sharing: a device's capacity must be positive, not " << c;
  }
  CONVEYOR_CHECK(sharing.busy_capacity.size() <= sharing.capacity.size())
      << "compute sharing: busy capacities for " << sharing.busy_capacity.size() << " devices, of "
      << sharing.capacity.size();
  for (const std::vector<double>& by_busy : sharing.busy_capacity) {
    for (double c : by_busy) {
      CONVEYOR_CHECK(c > 0) << "compute sharing: a busy count's capacity must be positive, not "
                            << c;
    }
  }
}

std::vector<double> IntrinsicSeconds(const Timeline& timeline, const ComputeSharing& sharing) {
  const std::vector<Span>& spans = timeline.spans;
  std::vector<double> work(spans.size(), 0.0);
  // Each device's busy count changes only where a span of it opens or closes: sweep those
  // points in time order, crediting every open span with rate x length of each piece.
  struct Edge {
    double time;
    int delta;  // +1 opens, -1 closes
    size_t span;
  };
  std::map<int, std::vector<Edge>> edges;  // by device
  for (size_t i = 0; i < spans.size(); ++i) {
    if (spans[i].kind != SpanKind::kRun || spans[i].end <= spans[i].start) continue;
    if (sharing.device.empty()) {
      work[i] = spans[i].end - spans[i].start;
      continue;
    }
    const int d = sharing.device.at(spans[i].rank);
    edges[d].push_back({spans[i].start, +1, i});
    edges[d].push_back({spans[i].end, -1, i});
  }
  for (auto& [d, list] : edges) {
    // Closes before opens at one time: a span ending as another begins does not share.
    std::sort(list.begin(), list.end(), [](const Edge& a, const Edge& b) {
      return a.time != b.time ? a.time < b.time : a.delta < b.delta;
    });
    std::vector<size_t> open;
    double last = list.empty() ? 0 : list.front().time;
    for (const Edge& e : list) {
      if (!open.empty() && e.time > last) {
        const double credit = (e.time - last) * sharing.Rate(d, static_cast<int>(open.size()));
        for (size_t i : open) work[i] += credit;
      }
      last = e.time;
      if (e.delta > 0) {
        open.push_back(e.span);
      } else {
        open.erase(std::find(open.begin(), open.end(), e.span));
      }
    }
  }
  return work;
}

}  // namespace conveyor
