#include "conveyor/schedule/builders/builder_util.h"

#include <algorithm>

#include "conveyor/common/error.h"

namespace conveyor {

void CheckPipelineOptions(const ScheduleOptions& options, std::string_view schedule) {
  CONVEYOR_CHECK(options.pp >= 1) << schedule
                                  << " needs at least 1 pipeline rank, got pp = " << options.pp;
  CONVEYOR_CHECK(options.microbatches >= 1)
      << schedule << " needs at least 1 micro-batch, got microbatches = " << options.microbatches;
}

void CheckSingleChunk(const ScheduleOptions& options, std::string_view schedule) {
  CONVEYOR_CHECK(options.chunks == 0 || options.chunks == 1)
      << schedule << " places one stage per rank: chunks must be 0 (default) or 1, got chunks = "
      << options.chunks;
}

void CheckTwoChunks(const ScheduleOptions& options, std::string_view schedule) {
  CONVEYOR_CHECK(options.chunks == 0 || options.chunks == 2)
      << schedule << " places two stages on each rank: chunks must be 0 (default) or 2, got "
      << "chunks = " << options.chunks;
}

int ResolveChunks(const ScheduleOptions& options, std::string_view schedule, int default_chunks,
                  int min_chunks) {
  if (options.chunks == 0) return default_chunks;
  CONVEYOR_CHECK(options.chunks >= min_chunks)
      << schedule << " needs at least " << min_chunks << " chunks (stages) per rank (0 = default "
      << default_chunks << "), got chunks = " << options.chunks;
  return options.chunks;
}

std::vector<int> GroupSizes(int microbatches, int ranks) {
  CONVEYOR_ASSERT(microbatches >= 1 && ranks >= 1) << microbatches << " " << ranks;
  const int groups = std::max(1, microbatches / ranks);
  std::vector<int> sizes(groups, microbatches / groups);
  for (int g = 0; g < microbatches % groups; ++g) ++sizes[g];
  return sizes;
}

std::vector<Action> ChunkedOrder(const Layout& layout, int rank, Op op,
                                 const std::vector<int>& group_sizes, bool reverse_chunks) {
  std::vector<int> stages = layout.stages_of(rank);
  if (reverse_chunks) std::reverse(stages.begin(), stages.end());
  std::vector<Action> order;
  int first = 0;
  for (int size : group_sizes) {
    for (int stage : stages) {
      for (int mb = first; mb < first + size; ++mb) order.push_back(Action{op, stage, mb});
    }
    first += size;
  }
  CONVEYOR_ASSERT(first == layout.num_microbatches())
      << "groups cover " << first << " of " << layout.num_microbatches() << " micro-batches";
  return order;
}

std::vector<Action> OneFOneBOrder(const std::vector<Action>& forwards,
                                  const std::vector<Action>& backwards, int warmup) {
  CONVEYOR_ASSERT(forwards.size() == backwards.size())
      << forwards.size() << " forwards, " << backwards.size() << " backwards";
  const int n = static_cast<int>(forwards.size());
  const int lead = std::clamp(warmup, 0, n);
  std::vector<Action> order(forwards.begin(), forwards.begin() + lead);
  for (int k = 0; k < n; ++k) {
    if (lead + k < n) order.push_back(forwards[lead + k]);
    order.push_back(backwards[k]);
  }
  return order;
}

std::vector<Action> DeferWeightPasses(const std::vector<Action>& order, int lag) {
  CONVEYOR_ASSERT(lag >= 0) << "lag " << lag;
  auto weight_of = [](const Action& input) {
    return Action{Op::kBackwardWeight, input.stage, input.microbatch};
  };
  std::vector<Action> inputs, out;
  for (const Action& a : order) {
    CONVEYOR_ASSERT(a.op != Op::kBackwardWeight) << "already holds " << a;
    out.push_back(a);
    if (a.op != Op::kBackwardInput) continue;
    inputs.push_back(a);
    const int due = static_cast<int>(inputs.size()) - 1 - lag;
    if (due >= 0) out.push_back(weight_of(inputs[due]));
  }
  const int placed = std::max(0, static_cast<int>(inputs.size()) - lag);
  for (int k = placed; k < static_cast<int>(inputs.size()); ++k)
    out.push_back(weight_of(inputs[k]));
  return out;
}

}  // namespace conveyor
