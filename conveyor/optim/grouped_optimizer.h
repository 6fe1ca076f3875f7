// Parameters in disjoint groups, each updated by an optimizer of its own: under ZeRO-1 with
// expert parallelism, the dense parameters' AdamW state sharded over their data-parallel
// replicas and the experts' over the experts' own replicas (a smaller group: the experts
// borrow data-parallel ranks), each ShardedAdamW over its group.
//
// Collective as its optimizers are: every call runs each group's optimizer in group order,
// and a group's ranks hold the same parameters of it. Not thread-safe; one per rank.
#ifndef CONVEYOR_OPTIM_GROUPED_OPTIMIZER_H_
#define CONVEYOR_OPTIM_GROUPED_OPTIMIZER_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "conveyor/optim/optimizer.h"

namespace conveyor {

class GroupedOptimizer : public Optimizer {
 public:
  // `group_of(name)`: the index in `optimizers` of the one updating parameter `name`.
  // Precondition: optimizers non-empty, every index group_of gives in range (asserted).
  GroupedOptimizer(std::vector<std::unique_ptr<Optimizer>> optimizers,
                   std::function<size_t(const std::string&)> group_of);

  // Each group's optimizer steps its parameters, in the order `params` lists them; a group
  // without parameters here is not called.
  void Step(const NamedTensors& params, double lr, int64_t step) override;
  // Every group's state, by the parameters' names.
  std::map<std::string, at::Tensor> State() const override;
  // Each group's optimizer loads its parameters' state from `state`; nothing is loaded when
  // any of them refuses (each checks before it loads: the checks run first for all).
  void LoadState(const NamedTensors& params,
                 const std::map<std::string, at::Tensor>& state) override;
  int64_t StateBytes() const override;

 private:
  // `params` split by group, each in its order in `params`.
  std::vector<NamedTensors> Split(const NamedTensors& params) const;

  std::vector<std::unique_ptr<Optimizer>> optimizers_;
  std::function<size_t(const std::string&)> group_of_;
};

}  // namespace conveyor

#endif  // CONVEYOR_OPTIM_GROUPED_OPTIMIZER_H_
