#include "conveyor/train/compute_placement.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <map>

#include "conveyor/common/error.h"
#include "conveyor/common/process_stats.h"
#include "conveyor/train/world_collectives.h"

namespace conveyor {

RankPlacement ThisRankPlacement(const MeshCoords& coords) {
  RankPlacement p;
  p.machine = static_cast<double>(MachineId());
  p.cores = AvailableCores();
  p.threads = std::max(at::get_num_threads(), 1);
  p.coords = coords;
  return p;
}

ComputeSharing PipelineSharing(const std::vector<RankPlacement>& everyone, const MeshCoords& coords,
                               int pp) {
  // This pipeline's ranks, by pipeline rank; and every machine's world ranks and threads.
  std::vector<const RankPlacement*> pipeline(pp, nullptr);
  std::map<double, int> world_ranks;
  std::map<double, double> threads;
  for (const RankPlacement& p : everyone) {
    ++world_ranks[p.machine];
    threads[p.machine] += p.threads;
    if (p.coords.dp == coords.dp && p.coords.tp == coords.tp && p.coords.cp == coords.cp &&
        p.coords.pp < pp) {
      pipeline[p.coords.pp] = &p;
    }
  }
  ComputeSharing sharing;
  std::map<double, int> device_of;  // machine -> device
  std::map<double, int> pipeline_ranks;
  for (const RankPlacement* p : pipeline) {
    CONVEYOR_ASSERT(p != nullptr) << "a pipeline rank reported no placement";
    ++pipeline_ranks[p->machine];
  }
  for (const RankPlacement* p : pipeline) {
    auto [it, added] = device_of.emplace(p->machine, static_cast<int>(device_of.size()));
    if (added) {
      const double copies =
          static_cast<double>(world_ranks[p->machine]) / pipeline_ranks[p->machine];
      const double threads_per_rank = threads[p->machine] / world_ranks[p->machine];
      sharing.capacity.push_back(p->cores / (threads_per_rank * copies));
    }
    sharing.device.push_back(it->second);
  }
  return sharing;
}

ComputeSharing GatherPipelineSharing(Transport* world, const MeshCoords& coords, int pp) {
  const RankPlacement mine = ThisRankPlacement(coords);
  const at::Tensor rows = GatherOverRanks(
      world,
      at::tensor(
          std::vector<double>{mine.machine, static_cast<double>(mine.cores),
                              static_cast<double>(mine.threads), static_cast<double>(coords.dp),
                              static_cast<double>(coords.tp), static_cast<double>(coords.pp),
                              static_cast<double>(coords.cp)},
          at::kDouble));  // (world, 7)
  std::vector<RankPlacement> everyone;
  for (int64_t r = 0; r < rows.size(0); ++r) {
    const at::Tensor row = rows[r];
    RankPlacement p;
    p.machine = row[0].item<double>();
    p.cores = static_cast<int>(row[1].item<double>());
    p.threads = static_cast<int>(row[2].item<double>());
    p.coords = MeshCoords{.dp = static_cast<int>(row[3].item<double>()),
                          .tp = static_cast<int>(row[4].item<double>()),
                          .pp = static_cast<int>(row[5].item<double>()),
                          .cp = static_cast<int>(row[6].item<double>())};
    everyone.push_back(p);
  }
  return PipelineSharing(everyone, coords, pp);
}

namespace {

// Where each rank's slots begin in the vector of computes, and its size (the last entry):
// one (start, end) per span the executor records.
std::vector<size_t> ComputeOffsets(const Program& program) {
  std::vector<size_t> offsets{0};
  for (const auto& actions : program.ranks) {
    size_t computes = 0;
    // The executor runs an OVERLAP_F_B unit as its two halves: two spans.
    for (const Action& a : actions)
      computes += a.op == Op::kOverlapFB ? 2 : IsCompute(a.op) ? 1 : 0;
    offsets.push_back(offsets.back() + 2 * computes);
  }
  return offsets;
}

}  // namespace

std::vector<double> ComputeSlots(const Program& program, const Timeline& step, int rank) {
  const std::vector<size_t> offsets = ComputeOffsets(program);
  std::vector<double> slots(offsets.back(), 0.0);
  size_t at = offsets[rank];
  for (const Span& s : step.spans) {
    if (s.kind != SpanKind::kRun || s.rank != rank) continue;
    CONVEYOR_ASSERT(at < offsets[rank + 1])
        << "rank " << rank << " ran more computes than its list";
    slots[at++] = s.start;
    slots[at++] = s.end;
  }
  CONVEYOR_ASSERT(at == offsets[rank + 1])
      << "rank " << rank << " ran fewer computes than its list";
  return slots;
}

std::vector<double> ComputeWork(const Program& program, const std::vector<double>& computes,
                                const ComputeSharing& sharing, int rank) {
  const std::vector<size_t> offsets = ComputeOffsets(program);
  CONVEYOR_ASSERT(computes.size() == offsets.back())
      << computes.size() << " compute times for " << offsets.back() / 2 << " computes";
  Timeline all;
  all.num_ranks = program.layout.num_ranks();
  size_t first = 0;  // rank's first span in `all`
  for (int r = 0; r < all.num_ranks; ++r) {
    if (r == rank) first = all.spans.size();
    for (size_t at = offsets[r]; at < offsets[r + 1]; at += 2) {
      all.spans.push_back(Span{r, Action{}, computes[at], computes[at + 1]});
    }
  }
  const std::vector<double> work = IntrinsicSeconds(all, sharing);
  const size_t count = (offsets[rank + 1] - offsets[rank]) / 2;
  return std::vector<double>(work.begin() + first, work.begin() + first + count);
}

}  // namespace conveyor
