#include "conveyor/comm/hop_latency.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "conveyor/common/error.h"

namespace conveyor {
namespace {

double Seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

double MeasureHopLatency(Transport& transport, int64_t bytes, int round_trips) {
  CONVEYOR_CHECK(bytes >= 4 && round_trips >= 1)
      << "hop latency needs bytes >= 4 and round_trips >= 1, got " << bytes << " and "
      << round_trips;
  const int n = transport.world_size(), me = transport.rank();
  if (n == 1) return 0;
  at::Tensor message = at::zeros({bytes / 4}, at::kFloat);
  at::Tensor one_way = at::zeros({n - 1}, at::kDouble);  // filled by each pair's first rank
  for (int a = 0; a + 1 < n; ++a) {
    if (me != a && me != a + 1) continue;
    const uint32_t tag = Transport::kMaxTag - static_cast<uint32_t>(a);
    std::vector<double> halves;
    for (int k = 0; k <= round_trips; ++k) {  // k = 0 warms the connection up
      if (me == a) {
        const double start = Seconds();
        transport.Send(message, a + 1, tag)->Wait();
        transport.Recv(message, a + 1, tag)->Wait();
        if (k > 0) halves.push_back((Seconds() - start) / 2);
      } else {
        transport.Recv(message, a, tag)->Wait();
        transport.Send(message, a, tag)->Wait();
      }
    }
    if (me == a) {
      std::nth_element(halves.begin(), halves.begin() + halves.size() / 2, halves.end());
      one_way[a] = halves[halves.size() / 2];
    }
  }
  std::vector<at::Tensor> all = {one_way};
  transport.AllReduceSum(all);
  return all[0].mean().item<double>();
}

}  // namespace conveyor
