#include "conveyor/sim/layer_cost_table.h"

#include <algorithm>

#include "conveyor/common/error.h"

namespace conveyor {

LayerSample LayerCostTable::At(const MeasuredLayer& layer, double n) const {
  CONVEYOR_ASSERT(sequences.size() >= 2 && layer.at.size() == sequences.size())
      << layer.at.size() << " samples for " << sequences.size() << " sizes";
  size_t k = 1;  // the piece [k - 1, k] that holds n, or the nearest
  while (k + 1 < sequences.size() && n > static_cast<double>(sequences[k])) ++k;
  const double n0 = static_cast<double>(sequences[k - 1]), n1 = static_cast<double>(sequences[k]);
  const double x = (n - n0) / (n1 - n0);
  const LayerSample &a = layer.at[k - 1], &b = layer.at[k];
  auto line = [&](double LayerSample::*field) {
    return std::max(0.0, a.*field + x * (b.*field - a.*field));
  };
  return {line(&LayerSample::forward_s),      line(&LayerSample::input_s),
          line(&LayerSample::weight_s),       line(&LayerSample::activation_bytes),
          line(&LayerSample::backward_bytes), line(&LayerSample::backward_s),
          line(&LayerSample::weight_bytes),   line(&LayerSample::forward_bytes),
          line(&LayerSample::infer_bytes),    line(&LayerSample::infer_s)};
}

double LayerCostTable::CapacityAt(double n, int busy) const {
  CONVEYOR_ASSERT(capacity.size() == sequences.size() && !sequences.empty() && busy >= 1)
      << capacity.size() << " capacities for " << sequences.size() << " sizes, " << busy << " busy";
  auto at = [&](size_t k) {
    CONVEYOR_ASSERT(!capacity[k].empty()) << "no capacity at size " << sequences[k];
    return capacity[k][std::min<size_t>(busy, capacity[k].size()) - 1];
  };
  if (n <= static_cast<double>(sequences.front())) return at(0);
  for (size_t k = 1; k < sequences.size(); ++k) {
    const double n0 = static_cast<double>(sequences[k - 1]), n1 = static_cast<double>(sequences[k]);
    if (n <= n1) return at(k - 1) + (n - n0) / (n1 - n0) * (at(k) - at(k - 1));
  }
  return at(sequences.size() - 1);
}

}  // namespace conveyor
