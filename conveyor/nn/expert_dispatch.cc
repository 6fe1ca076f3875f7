#include "conveyor/nn/expert_dispatch.h"

#include <ATen/ATen.h>

#include "conveyor/comm/transport.h"
#include "conveyor/common/error.h"
#include "conveyor/nn/all_to_all.h"

namespace conveyor {

ExpertRows DispatchToExperts(const at::Tensor& sorted, const at::Tensor& counts, int experts,
                             const ExpertParallel& ep) {
  const int p = ep.size, local = experts / p;
  CONVEYOR_ASSERT(p >= 1 && experts % p == 0 && counts.numel() == experts)
      << experts << " experts over " << p << " expert-parallel ranks, " << counts.numel()
      << " counts";
  ExpertRows mine;
  if (p == 1) {
    const at::Tensor host = counts.cpu();
    mine.rows = sorted;
    mine.per_expert.assign(host.data_ptr<int64_t>(), host.data_ptr<int64_t>() + local);
    return mine;
  }
  // How many rows every rank sends each of this rank's experts: (P, L), row s from rank s.
  const at::Tensor host = ep.groups()
                              .Current()
                              ->AllToAll(counts.view({experts, 1}), std::vector<int64_t>(p, local),
                                         std::vector<int64_t>(p, local))
                              .view({p, local})
                              .cpu();
  const at::Tensor to_rank = counts.cpu().view({p, local}).sum(1);  // rows to each rank
  const int64_t* from = host.data_ptr<int64_t>();
  mine.sent.assign(to_rank.data_ptr<int64_t>(), to_rank.data_ptr<int64_t>() + p);
  mine.received.assign(p, 0);
  for (int s = 0; s < p; ++s) {
    for (int l = 0; l < local; ++l) mine.received[s] += from[s * local + l];
  }
  // Received rows come by source rank, then expert; the experts take them by expert, then
  // source: for each expert, its rows of every source in turn.
  const at::Tensor received = ExchangeRows(sorted, ep.groups(), mine.sent, mine.received);
  std::vector<int64_t> starts(p * local);
  mine.per_expert.assign(local, 0);
  for (int s = 0, row = 0; s < p; ++s) {
    for (int l = 0; l < local; ++l) {
      starts[s * local + l] = row;
      row += from[s * local + l];
      mine.per_expert[l] += from[s * local + l];
    }
  }
  std::vector<int64_t> by_expert;
  by_expert.reserve(received.size(0));
  for (int l = 0; l < local; ++l) {
    for (int s = 0; s < p; ++s) {
      for (int64_t r = 0; r < from[s * local + l]; ++r) {
        by_expert.push_back(starts[s * local + l] + r);
      }
    }
  }
  mine.order = at::tensor(by_expert, at::kLong).to(received.device());
  mine.rows = received.index_select(0, mine.order);
  return mine;
}

at::Tensor CombineFromExperts(const at::Tensor& out, const ExpertRows& dispatched,
                              const ExpertParallel& ep) {
  if (ep.size == 1) return out;
  // Back in the received order, then home.
  const at::Tensor back = at::zeros_like(out).index_copy(0, dispatched.order, out);
  return ExchangeRows(back, ep.groups(), dispatched.received, dispatched.sent);
}

}  // namespace conveyor
