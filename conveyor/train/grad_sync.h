// Gradients across ranks after a step: copies of one parameter on several ranks (tied
// input embedding and LM head on the first and last stage, DualPipe's two model copies) get
// the sum of their gradients, and the global gradient norm counts every parameter once.
//
// Every rank computes the same `holders` map (from the model and the partition, without
// exchanging anything), so the sub-groups are created in one fixed order on every rank.
//
// Not thread-safe; one per rank. Collective: every rank calls each method in the same order.
#ifndef CONVEYOR_TRAIN_GRAD_SYNC_H_
#define CONVEYOR_TRAIN_GRAD_SYNC_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "conveyor/comm/transport.h"
#include "conveyor/module/stage_module.h"
#include "conveyor/nn/tensor_parallel.h"

namespace conveyor {

class GradSync {
 public:
  // `holders`: for every parameter name, the ranks of `world` holding a copy (any order,
  // duplicates allowed: a rank may hold two copies). `world` (the pipeline's ranks) may be
  // null for a single rank. `tp`: the tensor-parallel shard this rank holds of each of its
  // parameters (tensor_parallel.h); `tp.group` must outlive the GradSync.
  GradSync(Transport* world, const std::map<std::string, std::vector<int>>& holders,
           const TensorParallel& tp = {});

  // Every copy's gradient becomes the sum over all copies (local and remote).
  void SumShared(const NamedTensors& params);

  // sqrt of the sum of squared gradients over every distinct parameter of the model: split
  // parameters count every tensor-parallel shard, replicated ones once.
  double GlobalNorm(const NamedTensors& params);

  // Scales every gradient by `factor`.
  static void Scale(const NamedTensors& params, double factor);

 private:
  struct Group {
    std::vector<int> ranks;
    std::unique_ptr<Transport> transport;  // null on non-members (and for one rank)
    std::vector<std::string> names;        // sorted
  };
  Transport* world_;
  int rank_;
  TensorParallel tp_;
  std::vector<Group> groups_;
  std::map<std::string, int> owner_;  // the rank that counts a name in the norm
};

}  // namespace conveyor

#endif  // CONVEYOR_TRAIN_GRAD_SYNC_H_
