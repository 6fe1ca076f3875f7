#include "conveyor/cli/cost_flags.h"

#include <sstream>

#include "conveyor/common/error.h"

namespace conveyor::cli {

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
  auto non_negative = [](double value, const char* name) {
    CONVEYOR_CHECK(value >= 0) << "--" << name << " must be >= 0, got " << value;
  };
  non_negative(f, "f");
  non_negative(i, "i");
  non_negative(w, "w");
  non_negative(comm_latency, "comm-latency");
  non_negative(comm_bandwidth, "comm-bandwidth");
  non_negative(message_bytes, "message-bytes");
  CONVEYOR_CHECK(mem_w >= 0 && mem_w <= 1) << "--mem-w must be within [0, 1], got " << mem_w;
  CostModel costs;
  costs.uniform = StageCost{f, i, w, b, overlap};
  costs.comm_latency = comm_latency;
  costs.comm_bandwidth = comm_bandwidth;
  costs.message_bytes = message_bytes;
  costs.mem_b = 1;
  costs.mem_w = mem_w;
  return costs;
}

std::string CostFlags::Describe() const {
  const StageCost c{f, i, w, b, overlap};
  std::ostringstream out;
  out << "F=" << f << " I=" << i << " W=" << w << " B=" << c.full_backward();
  if (overlap >= 0) out << " F&B=" << overlap;
  out << " comm=" << comm_latency;
  if (comm_bandwidth > 0) out << "+" << message_bytes << "B/" << comm_bandwidth << "B/unit";
  return out.str();
}

}  // namespace conveyor::cli
