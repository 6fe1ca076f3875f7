// Gradients across ranks after a step: copies of one parameter on several ranks (tied
// input embedding and LM head on the first and last stage, DualPipe's two model copies) get
// the sum of their gradients, and the global gradient norm counts every parameter once.
//
// Under ZeRO stage 1 (a ShardLayout, shard_layout.h) the data-parallel reducer leaves each
// replica the summed gradient of only its range of the scattered parameters: the norm then
// counts that range on each replica and sums it over the DP group. The shared parameters
// (SharedNames) must be whole in that layout, as SumShared sums whole tensors. Under expert
// parallelism the experts' gradients may be scattered the same way over the experts'
// data-parallel group, by a layout of their own.
//
// Every rank computes the same `holders` map (from the model and the partition, without
// exchanging anything), so the sub-groups are created in one fixed order on every rank.
//
// Not thread-safe; one per rank. Collective: every rank calls each method in the same order.
#ifndef CONVEYOR_TRAIN_PIPELINE_GRADIENTS_H_
#define CONVEYOR_TRAIN_PIPELINE_GRADIENTS_H_

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "conveyor/comm/transport.h"
#include "conveyor/module/stage_module.h"
#include "conveyor/nn/tensor_parallel.h"
#include "conveyor/optim/shard_layout.h"

namespace conveyor {

class PipelineGradients {
 public:
  // `holders`: for every parameter name, the ranks of `world` holding a copy (any order,
  // duplicates allowed: a rank may hold two copies). `world` (the pipeline's ranks) may be
  // null for a single rank. `tp`: this rank's tensor-parallel group (tensor_parallel.h), which
  // must outlive the PipelineGradients, and `specs` how each parameter is laid out over it.
  // `dp_group` and `zero`: both null, or this rank's DP group and the ZeRO-1 layout of its
  // parameters (shards = the group's size, index = its rank; every shared name whole), both
  // outliving the PipelineGradients. `ep_group`: this rank's expert-parallel group (null
  // without expert parallelism), among whose ranks the parameters declared ExpertWeight are
  // divided; outliving the PipelineGradients. `expert_dp_group` and `expert_zero`: both
  // null, or (with `ep_group`) the experts' data-parallel group and the ZeRO-1 layout of this
  // rank's experts over it, as `dp_group` and `zero` for the others.
  PipelineGradients(Transport* world, const std::map<std::string, std::vector<int>>& holders,
                    const TensorParallel& tp = {}, ParameterSpecs specs = {},
                    Transport* dp_group = nullptr,
                    std::shared_ptr<const ShardLayout> zero = nullptr,
                    Transport* ep_group = nullptr, Transport* expert_dp_group = nullptr,
                    std::shared_ptr<const ShardLayout> expert_zero = nullptr);

  // The names SumShared sums: those with two copies or more in `holders`.
  static std::set<std::string> SharedNames(const std::map<std::string, std::vector<int>>& holders);

  // Every copy's gradient becomes the sum over all copies (local and remote).
  void SumShared(const NamedTensors& params);

  // sqrt of the sum of squared gradients over every distinct parameter of the model: split
  // parameters count every tensor-parallel shard, replicated ones once. With a layout, the
  // scattered parameters count this replica's range, summed over the DP group (collective
  // over it too). Experts divided over an EP group count on the rank holding them, summed
  // over the group (collective over it) and added by TP rank 0 (the group may be made of TP
  // ranks); scattered, their range summed over the experts' DP group first.
  double GlobalNorm(const NamedTensors& params);

  // Scales every gradient by `factor` (multi-tensor kernels: a few launches for all).
  static void Scale(const NamedTensors& params, double factor);

  // The sum of the squared elements of every tensor of `grads` (all on one device; 0 for
  // none): each tensor's norm by a multi-tensor kernel, in double where one overflows fp32.
  // One host wait.
  static double SumOfSquares(at::TensorList grads);

 private:
  struct Group {
    std::vector<int> ranks;
    std::unique_ptr<Transport> transport;  // null on non-members (and for one rank)
    std::vector<std::string> names;        // sorted
  };
  Transport* world_;
  int rank_;
  TensorParallel tp_;
  ParameterSpecs specs_;
  Transport* dp_group_;
  std::shared_ptr<const ShardLayout> zero_;
  Transport* ep_group_;
  Transport* expert_dp_group_;
  std::shared_ptr<const ShardLayout> expert_zero_;
  std::vector<Group> groups_;
  std::map<std::string, int> owner_;  // the rank that counts a name in the norm
};

}  // namespace conveyor

#endif  // CONVEYOR_TRAIN_PIPELINE_GRADIENTS_H_
