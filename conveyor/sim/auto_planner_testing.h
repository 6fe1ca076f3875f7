// Test helpers for the auto-planner and its layer costs: a small measured table and a request
// planned by one.
#ifndef CONVEYOR_SIM_AUTO_PLANNER_TESTING_H_
#define CONVEYOR_SIM_AUTO_PLANNER_TESTING_H_

#include <cstdint>

#include "conveyor/sim/auto_planner.h"
#include "conveyor/sim/layer_cost_table.h"
#include "conveyor/sim/transformer_spec.h"

namespace conveyor {

// A measured table of 6 blocks: a block twice the head's time, selective recomputation
// dearer than none but lighter. Linear between the two sizes timed (1 and 3 sequences).
inline LayerCostTable MeasuredTestTable() {
  LayerCostTable t;
  t.model = TransformerSpec{.layers = 6, .hidden = 64, .heads = 4, .vocab = 256, .seq_len = 64};
  t.sequences = {1, 3};
  t.embedding = {1e3, {{1e-5, 0, 1e-5, 1e4}, {3e-5, 0, 3e-5, 3e4}}};
  t.block = {5e4, {{1e-3, 1e-3, 1e-3, 1e6}, {3e-3, 3e-3, 3e-3, 3e6}}};
  t.block_selective = {5e4, {{1e-3, 1.5e-3, 1e-3, 5e5}, {3e-3, 4.5e-3, 3e-3, 1.5e6}}};
  t.head = {2e4, {{5e-4, 5e-4, 5e-4, 2e6}, {1.5e-3, 1.5e-3, 1.5e-3, 6e6}}};
  return t;
}

// A request planned by `table` for `world` ranks and `global_batch` sequences a step, every
// candidate kept, memory no limit.
inline AutoPlanRequest MeasuredRequest(const LayerCostTable& table, int world,
                                       int64_t global_batch) {
  AutoPlanRequest r;
  r.model = table.model;
  r.measured = table;
  r.world = world;
  r.global_batch = global_batch;
  r.memory_per_rank = 1e12;
  r.top = 1000;
  return r;
}

}  // namespace conveyor

#endif  // CONVEYOR_SIM_AUTO_PLANNER_TESTING_H_
