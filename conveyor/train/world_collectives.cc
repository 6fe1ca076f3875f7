#include "conveyor/train/world_collectives.h"

#include <ATen/ATen.h>

#include <vector>

namespace conveyor {

at::Tensor SumOverRanks(Transport* world, at::Tensor t) {
  if (world == nullptr || world->world_size() == 1) return t;
  std::vector<at::Tensor> shared = {t};
  world->AllReduceSum(shared);
  return shared[0];
}

at::Tensor GatherOverRanks(Transport* world, const at::Tensor& t) {
  if (world == nullptr) return t.unsqueeze(0);
  return at::stack(world->AllGather(t));
}

}  // namespace conveyor
