#include "conveyor/optim/grouped_optimizer.h"

#include <utility>

#include "conveyor/common/error.h"

namespace conveyor {

GroupedOptimizer::GroupedOptimizer(std::vector<std::unique_ptr<Optimizer>> optimizers,
                                   std::function<size_t(const std::string&)> group_of)
    : optimizers_(std::move(optimizers)), group_of_(std::move(group_of)) {
  CONVEYOR_ASSERT(!optimizers_.empty()) << "a grouped optimizer of no optimizer";
}

std::vector<NamedTensors> GroupedOptimizer::Split(const NamedTensors& params) const {
  std::vector<NamedTensors> groups(optimizers_.size());
  for (const auto& named : params) {
    const size_t g = group_of_(named.first);
    CONVEYOR_ASSERT(g < groups.size())
        << named.first << " in group " << g << " of " << groups.size();
    groups[g].push_back(named);
  }
  return groups;
}

void GroupedOptimizer::Step(const NamedTensors& params, double lr, int64_t step) {
  const std::vector<NamedTensors> groups = Split(params);
  for (size_t g = 0; g < groups.size(); ++g) {
    if (!groups[g].empty()) optimizers_[g]->Step(groups[g], lr, step);
  }
}

std::map<std::string, at::Tensor> GroupedOptimizer::State() const {
  std::map<std::string, at::Tensor> state;
  for (const auto& optimizer : optimizers_) state.merge(optimizer->State());
  return state;
}

void GroupedOptimizer::LoadState(const NamedTensors& params,
                                 const std::map<std::string, at::Tensor>& state) {
  for (const auto& [name, p] : params) {  // every entry checked before any group loads
    AdamW::StateEntry(state, name + "/exp_avg", p);
    AdamW::StateEntry(state, name + "/exp_avg_sq", p);
  }
  const std::vector<NamedTensors> groups = Split(params);
  for (size_t g = 0; g < groups.size(); ++g) {
    if (!groups[g].empty()) optimizers_[g]->LoadState(groups[g], state);
  }
}

int64_t GroupedOptimizer::StateBytes() const {
  int64_t bytes = 0;
  for (const auto& optimizer : optimizers_) bytes += optimizer->StateBytes();
  return bytes;
}

}  // namespace conveyor
