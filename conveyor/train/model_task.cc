#include "conveyor/train/model_task.h"

#include <set>

namespace conveyor {

std::vector<ParameterShapes> ModelTask::LayerShapes() const {
  std::vector<ParameterShapes> shapes;
  for (int l = 0; l < num_layers(); ++l) {
    ParameterShapes& layer = shapes.emplace_back();
    for (const auto& built : BuildLayers({}, {l, l + 1})) {
      for (const auto& [name, p] : built->NamedParameters()) layer[name] = p.sizes().vec();
    }
  }
  return shapes;
}

int64_t CountParameters(const std::vector<ParameterShapes>& layers,
                        const std::function<bool(const std::string&)>& which) {
  std::set<std::string> counted;
  int64_t total = 0;
  for (const ParameterShapes& layer : layers) {
    for (const auto& [name, shape] : layer) {
      if ((which && !which(name)) || !counted.insert(name).second) continue;
      int64_t numel = 1;
      for (int64_t d : shape) numel *= d;
      total += numel;
    }
  }
  return total;
}

}  // namespace conveyor
