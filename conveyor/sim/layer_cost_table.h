// The costs of a language model's layer kinds as `conveyor profile` measures them on one
// device (LayerCostTable), for the auto-planner (auto_planner.h) to plan by: each kind's
// times and bytes at several micro-batch sizes, its tensor-parallel shards, and the device's
// capacity when several ranks share it.
//
// Plain values; pure (no torch).
#ifndef CONVEYOR_SIM_LAYER_COST_TABLE_H_
#define CONVEYOR_SIM_LAYER_COST_TABLE_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "conveyor/sim/transformer_spec.h"

namespace conveyor {

// One layer's measured costs for a micro-batch.
struct LayerSample {
  double forward_s = 0;
  double input_s = 0;           // backward for the layer's input
  double weight_s = 0;          // backward for its weights
  double activation_bytes = 0;  // held from its forward to its backward
  double backward_bytes = 0;    // allocated at most while its backward runs, beyond those
  double backward_s = 0;        // the whole backward at once (B); 0: input_s + weight_s
  double weight_bytes = 0;      // of activation_bytes and the output's gradient, what W needs
                                // (held from I until W)
  double forward_bytes = 0;     // allocated at most while its forward runs, beyond what it keeps
  double infer_bytes = 0;       // allocated at most by a forward that keeps nothing (no
                                // autograd: full recomputation's first forward, evaluation)
  double infer_s = 0;           // that forward's time; 0: forward_s
};

// A layer kind as `conveyor profile` measured it: its parameters and its costs at each of
// the table's micro-batch sizes.
struct MeasuredLayer {
  double params = 0;
  std::vector<LayerSample> at;
};

// The layer kinds of a language model, each as measured. A Mixture-of-Experts model's sparse
// blocks are kinds of their own, timed with every expert on the rank (ep 1: under expert
// parallelism a rank computes, on average, as many token-expert pairs); a dense model has
// none (their `at` empty). In a model without dense blocks, `block` is its sparse one.
struct MeasuredKinds {
  MeasuredLayer embedding, block, block_selective, head;
  MeasuredLayer sparse_block, sparse_block_selective;
};
// Its kinds in that order, to go over them.
inline constexpr MeasuredLayer MeasuredKinds::*kMeasuredKinds[] = {
    &MeasuredKinds::embedding,       &MeasuredKinds::block,
    &MeasuredKinds::block_selective, &MeasuredKinds::head,
    &MeasuredKinds::sparse_block,    &MeasuredKinds::sparse_block_selective};

// What `conveyor profile` measured of a model's layer kinds on one device: the whole layers
// (the MeasuredKinds it is), and one rank's shard of them for each tensor-parallel size timed.
struct LayerCostTable : MeasuredKinds {
  TransformerSpec model;           // what was timed (seq_len: the sequences' tokens)
  std::vector<int64_t> sequences;  // the micro-batch sizes timed: two or more, ascending
  // By TP size (> 1): one rank's shard of each kind at each size, its collectives skipped (the
  // planner prices them on the link). A shard is not the whole layer divided by tp: what
  // stays whole under TP (norms, residuals) and every operation's fixed cost remain (on the
  // CPU, half a block at one sequence took 0.70 of the whole). The planner divides the whole
  // layer by tp for a TP size missing here.
  std::map<int, MeasuredKinds> tp_shards;
  int threads = 1;             // intra-op threads of the timing
  std::string device;          // "cpu"
  double element_bytes = 4;    // of an activation (fp32 on the CPU)
  double optimizer_s = 0;      // the step's end: norm, clip, AdamW (trainer.h), seconds a param
  double optimizer_bytes = 0;  // what AdamW's step allocates beyond its state, bytes a parameter
  // The machine's cores, and how many lone ranks' worth of work k of `capacity_ranks` ranks
  // busy at once do on the device, at each size timed: capacity[size][k - 1], k = 1 ..
  // capacity_ranks (a block's forwards in k ranks at once against alone). On the CPU below k
  // where cores are hyperthreads or share caches and ranks pay for switching (more ranks than
  // cores take turns, slower than alone even one at a time); on a GPU above 1 where small
  // micro-batches leave it idle between kernels that other ranks' kernels fill.
  int cores = 1;
  std::vector<std::vector<double>> capacity = {{1}, {1}};  // a size each, > 0
  int capacity_ranks = 1;
  // The factor the profile's layer times at each size were scaled by.
  std::vector<double> calibration;

  // `layer` at a micro-batch of `sequences`: piecewise linear through the sizes timed (beyond
  // them, the nearest piece's line), never below 0.
  LayerSample At(const MeasuredLayer& layer, double sequences) const;
  // The capacity with `busy` (>= 1) ranks computing at a micro-batch of `sequences`:
  // piecewise linear between the sizes timed, the nearest size's beyond them; for more busy
  // ranks than measured, that of all of them.
  double CapacityAt(double sequences, int busy) const;
  // With all capacity_ranks busy at the largest size.
  double FullCapacity() const {
    return CapacityAt(static_cast<double>(sequences.back()), capacity_ranks);
  }
};

}  // namespace conveyor

#endif  // CONVEYOR_SIM_LAYER_COST_TABLE_H_
