#include "conveyor/partition/partition.h"

#include <algorithm>
#include <limits>
#include <string>

#include "conveyor/common/error.h"

namespace conveyor {
namespace {

void CheckRequest(int layers, int stages) {
  CONVEYOR_CHECK(stages >= 1) << "the number of stages must be at least 1, got " << stages;
  CONVEYOR_CHECK(layers >= stages)
      << "cannot split " << layers << " layers into " << stages
      << " stages: every stage needs at least one layer (use fewer stages or more layers)";
}

}  // namespace

std::vector<LayerRange> Partition(const std::vector<double>& costs, int stages) {
  const int n = static_cast<int>(costs.size());
  CheckRequest(n, stages);
  std::vector<double> prefix(n + 1, 0);
  for (int i = 0; i < n; ++i) {
    CONVEYOR_CHECK(costs[i] >= 0) << "layer " << i << " has a negative cost " << costs[i];
    prefix[i + 1] = prefix[i] + costs[i];
  }
  constexpr double kInf = std::numeric_limits<double>::infinity();
  // best[j][i]: lightest max load of the first i layers in j slices; cut[j][i]: where the
  // j-th slice starts.
  std::vector<std::vector<double>> best(stages + 1, std::vector<double>(n + 1, kInf));
  std::vector<std::vector<int>> cut(stages + 1, std::vector<int>(n + 1, 0));
  best[0][0] = 0;
  for (int j = 1; j <= stages; ++j) {
    for (int i = j; i <= n - (stages - j); ++i) {
      for (int t = j - 1; t < i; ++t) {
        const double load = std::max(best[j - 1][t], prefix[i] - prefix[t]);
        if (load < best[j][i]) {
          best[j][i] = load;
          cut[j][i] = t;
        }
      }
    }
  }
  std::vector<LayerRange> ranges(stages);
  int end = n;
  for (int j = stages; j >= 1; --j) {
    ranges[j - 1] = LayerRange{cut[j][end], end};
    end = cut[j][end];
  }
  CONVEYOR_ASSERT(end == 0) << "partition does not start at layer 0";
  return ranges;
}

std::vector<LayerRange> PartitionEvenly(int layers, int stages) {
  CheckRequest(layers, stages);
  std::vector<LayerRange> ranges;
  int begin = 0;
  for (int s = 0; s < stages; ++s) {
    const int size = layers / stages + (s < layers % stages ? 1 : 0);
    ranges.push_back({begin, begin + size});
    begin += size;
  }
  return ranges;
}

std::vector<LayerRange> PartitionBySizes(const std::vector<int>& sizes, int layers, int stages,
                                         const char* name) {
  std::string listed;
  int sum = 0;
  for (int size : sizes) {
    listed += (listed.empty() ? "" : ",") + std::to_string(size);
    CONVEYOR_CHECK(size >= 1) << name << " " << listed << ": every stage needs a layer";
    sum += size;
  }
  CONVEYOR_CHECK(static_cast<int>(sizes.size()) == stages && sum == layers)
      << name << " " << listed << " gives " << sizes.size() << " stages " << sum
      << " layers; the pipeline has " << stages << " stages and the model " << layers
      << " layers (its blocks, the embedding and the head)";
  std::vector<LayerRange> ranges;
  int begin = 0;
  for (int size : sizes) {
    ranges.push_back({begin, begin + size});
    begin += size;
  }
  return ranges;
}

double MaxLoad(const std::vector<double>& costs, const std::vector<LayerRange>& ranges) {
  double most = 0;
  for (const LayerRange& r : ranges) {
    double load = 0;
    for (int i = r.begin; i < r.end; ++i) load += costs[i];
    most = std::max(most, load);
  }
  return most;
}

}  // namespace conveyor
