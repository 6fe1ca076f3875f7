#include "conveyor/cli/cost_flags.h"

#include <sstream>
#include <utility>

#include "conveyor/common/range_check.h"

namespace conveyor {

void CostFlags::Register(CLI::App& app) {
  app.add_option("--f", f, "time of one forward of one stage (default 1)");
  app.add_option("--i", i, "time of one backward-for-inputs (default 1)");
  app.add_option("--w", w, "time of one backward-for-weights (default 1)");
  app.add_option("--b", b, "time of one full backward (default I + W)");
  app.add_option("--overlap", overlap, "time of an overlapped F&B unit (default F + B)");
  app.add_option("--comm-latency", comm_latency, "latency of one message between ranks");
  app.add_option("--comm-bandwidth", comm_bandwidth, "bytes per time unit (default infinite)");
  app.add_option("--message-bytes", message_bytes, "bytes of one activation message");
  app.add_option("--mem-w", mem_w,
                 "share of a micro-batch's activation only W frees, in [0, 1] (default 1)");
}

CostModel CostFlags::ToCostModel() const {
  const std::pair<const char*, double> values[] = {{"--f", f},
                                                   {"--i", i},
                                                   {"--w", w},
                                                   {"--b", b.value_or(0)},
                                                   {"--overlap", overlap.value_or(0)},
                                                   {"--comm-latency", comm_latency},
                                                   {"--comm-bandwidth", comm_bandwidth},
                                                   {"--message-bytes", message_bytes}};
  for (const auto& [name, value] : values) CheckInRange(name, value, 0, kMaxCostFlag);
  CheckInRange("--mem-w", mem_w, 0, 1);
  CostModel costs;
  costs.uniform = StageCost{f, i, w, b.value_or(-1), overlap.value_or(-1)};
  costs.comm_latency = comm_latency;
  costs.comm_bandwidth = comm_bandwidth;
  costs.message_bytes = message_bytes;
  costs.mem_b = 1;
  costs.mem_w = mem_w;
  return costs;
}

std::string CostFlags::Describe() const {
  const StageCost c{f, i, w, b.value_or(-1), overlap.value_or(-1)};
  std::ostringstream out;
  out << "F=" << f << " I=" << i << " W=" << w << " B=" << c.full_backward();
  if (overlap.has_value()) out << " F&B=" << *overlap;
  out << " comm=" << comm_latency;
  if (comm_bandwidth > 0) out << "+" << message_bytes << "B/" << comm_bandwidth << "B/unit";
  return out.str();
}

}  // namespace conveyor
