#include "conveyor/train/pipeline_step_report.h"

#include <ATen/ATen.h>

#include "conveyor/train/world_collectives.h"

namespace conveyor {

PipelineStepReport GatherStepReports(Transport* pipeline, const RankStepReport& mine) {
  // One row per rank: the send posts, then start, end and loss.
  const int64_t posts = static_cast<int64_t>(mine.send_posts.size());
  std::vector<double> row = mine.send_posts;
  row.insert(row.end(), {mine.start, mine.end, mine.loss});
  const at::Tensor rows =
      GatherOverRanks(pipeline, at::tensor(row, at::kDouble));  // (p, posts + 3)
  const at::Tensor post_sums = rows.narrow(1, 0, posts).sum(0).contiguous();
  PipelineStepReport report;
  report.send_posts.assign(post_sums.data_ptr<double>(), post_sums.data_ptr<double>() + posts);
  report.first_start = rows.select(1, posts).min().item<double>();
  report.last_end = rows.select(1, posts + 1).max().item<double>();
  report.loss = rows.select(1, posts + 2).sum().item<double>();
  return report;
}

}  // namespace conveyor
