#include "conveyor/train/pipeline_step_report.h"

#include <ATen/ATen.h>

#include "conveyor/train/world_collectives.h"

namespace conveyor {

PipelineStepReport GatherStepReports(Transport* pipeline, const RankStepReport& mine) {
  // One row per rank: the send posts, the computes, then start, end, loss, the auxiliary
  // losses and the expert loads.
  const int64_t posts = static_cast<int64_t>(mine.send_posts.size());
  const int64_t computes = static_cast<int64_t>(mine.computes.size());
  const int64_t auxiliary = static_cast<int64_t>(mine.auxiliary.size());
  std::vector<double> row = mine.send_posts;
  row.insert(row.end(), mine.computes.begin(), mine.computes.end());
  row.insert(row.end(), {mine.start, mine.end, mine.loss});
  row.insert(row.end(), mine.auxiliary.begin(), mine.auxiliary.end());
  row.insert(row.end(), mine.expert_load.begin(), mine.expert_load.end());
  const at::Tensor rows = GatherOverRanks(
      pipeline, at::tensor(row, at::kDouble));  // (p, posts + computes + 3 + auxiliary)
  const at::Tensor sums = rows.narrow(1, 0, posts + computes).sum(0).contiguous();
  PipelineStepReport report;
  report.send_posts.assign(sums.data_ptr<double>(), sums.data_ptr<double>() + posts);
  report.computes.assign(sums.data_ptr<double>() + posts,
                         sums.data_ptr<double>() + posts + computes);
  const int64_t tail = posts + computes;
  report.first_start = rows.select(1, tail).min().item<double>();
  report.last_end = rows.select(1, tail + 1).max().item<double>();
  report.loss = rows.select(1, tail + 2).sum().item<double>();
  const int64_t loads = static_cast<int64_t>(mine.expert_load.size());
  const at::Tensor tail_sums = rows.narrow(1, tail + 3, auxiliary + loads).sum(0).contiguous();
  const double* summed = tail_sums.data_ptr<double>();
  report.auxiliary.assign(summed, summed + auxiliary);
  report.expert_load.assign(summed + auxiliary, summed + auxiliary + loads);
  return report;
}

}  // namespace conveyor
