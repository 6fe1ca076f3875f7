// `train --auto`'s choice of layout for a run on this machine's local ranks (dp x tp x pp,
// ep, schedule, micro-batches, stage split, recomputation, ZeRO): the model's layer costs
// (timed here, or given), the memory a rank may plan for, the auto-planner's plan
// (sim/auto_planner.h) and the first of its layouts the trainer runs. The command
// (cli/auto_train.h) reports it and starts the ranks with it.
#ifndef CONVEYOR_TRAIN_LAYOUT_CHOICE_H_
#define CONVEYOR_TRAIN_LAYOUT_CHOICE_H_

#include <cstddef>
#include <functional>
#include <optional>

#include "conveyor/sim/auto_planner.h"
#include "conveyor/train/train_config.h"

namespace conveyor {

// The share of the memory a rank may hold that the planner may fill: the rest stays free for
// what the prediction misses (the optimizer's and the allocator's temporaries, timing of
// frees), and the run's own limit stops the one that needs it.
inline constexpr double kPlannedShare = 0.9;

struct LayoutChoice {
  TrainConfig config;       // the given one with the chosen layout; it passes Validate
  AutoPlanRequest request;  // as planned
  AutoPlan plan;
  size_t chosen = 0;       // of plan.best: the first the trainer runs
  double limit = 0;        // bytes a rank may hold
  double data_bytes = 0;   // of them, what the training data's tensors take (0 on GPUs)
  int threads = 1;         // intra-op threads a rank
  int cores = 1;           // this machine's, for the ranks
  bool gpu = false;        // the ranks on GPUs
  bool share_gpu = false;  // of those, threads sharing one GPU

  const PlanCandidate& best() const { return plan.best[chosen]; }
};

// UserError unless `world` ranks can run on config.device here: on GPUs a GPU each, or all
// of them threads (`rank_threads`) sharing the one GPU, and with config.memory_per_rank.
void CheckLayoutDevices(const TrainConfig& config, int world, bool rank_threads);

// The layout for `world` ranks (CheckLayoutDevices passed) from `costs`, or from the
// model's layers timed here when there are none (`timing` is called first with the count
// of micro-batch sizes to time). The ranks share the CPU's cores, or have a GPU each, or
// are threads sharing the one GPU. The memory per rank is config.memory_per_rank (0 on
// the CPU: this machine's memory over the ranks), less the tensors the training data holds
// on the CPU. A Mixture-of-Experts model's layout includes its expert-parallel size. UserError
// for a classifier, when the data take all the memory, when no layout fits (naming the smallest
// need) and when the trainer runs none of those that do.
LayoutChoice ChooseLayout(const TrainConfig& config, int world,
                          const std::optional<LayerCostTable>& costs,
                          const std::function<void(size_t sizes)>& timing);

}  // namespace conveyor

#endif  // CONVEYOR_TRAIN_LAYOUT_CHOICE_H_
