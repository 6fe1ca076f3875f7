// The file `conveyor profile` writes and `plan --auto --costs` / `train --auto` read: a
// LayerCostTable (sim/auto_planner.h) as JSON.
//
//   {"format": "conveyor layer costs 7", "describe": "...", "device": "cpu", "threads": 1,
//    "element_bytes": 4, "optimizer_s_per_param": s,
//    "optimizer_bytes_per_param": b, "cores": 2,
//    "capacity": [[0.9, 1.6, 1.7, 1.8], [...], [...]] (a size each, 1 to capacity_ranks busy),
//    "capacity_ranks": 4, "calibration": [1.1, 1.0, 1.0],
//    "sequences": [1, 4, 16],
//    "model": {"layers", "hidden", "heads", "kv_heads", "intermediate", "vocab", "seq_len",
//              "gated_mlp", and for a Mixture-of-Experts model "experts", "top_k",
//              "expert_units", "shared_units", "dense_blocks"},
//    "embedding" | "block" | "block_selective" | "head" (and for a Mixture-of-Experts model
//    "sparse_block" | "sparse_block_selective"):
//      {"params": P, "at": [{"forward_s", "input_s", "weight_s", "backward_s",
//                             "activation_bytes", "backward_bytes", "weight_bytes",
//                             "forward_bytes", "infer_bytes", "infer_s"} a size]},
//    "tp_shards": {"2": {"embedding" | ... | "head" as above: one TP rank's shards}, ...}}
#ifndef CONVEYOR_CLI_LAYER_COST_JSON_H_
#define CONVEYOR_CLI_LAYER_COST_JSON_H_

#include <nlohmann/json.hpp>
#include <string>

#include "conveyor/sim/auto_planner.h"

namespace conveyor {

// `describe`: one line on the model timed (ModelTask::Describe).
nlohmann::json LayerCostTableJson(const LayerCostTable& table, const std::string& describe);

// The table in file `path`. UserError naming the file and the missing or bad key (a file of
// an older format: to be profiled again).
LayerCostTable ReadLayerCostTable(const std::string& path);

}  // namespace conveyor

#endif  // CONVEYOR_CLI_LAYER_COST_JSON_H_
