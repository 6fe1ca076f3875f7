// What each kind of layer of a language model costs on this process's device, measured:
// the numbers `conveyor profile` writes and the auto-planner (sim/auto_planner.h) plans by.
#ifndef CONVEYOR_TRAIN_LAYER_PROFILE_H_
#define CONVEYOR_TRAIN_LAYER_PROFILE_H_

#include <cstdint>
#include <vector>

#include "conveyor/sim/auto_planner.h"
#include "conveyor/train/train_config.h"

namespace conveyor {

// Times the embedding, one block (again built for selective recomputation) and the head of
// `config`'s model (gpt or llama; its weights drawn from the seed, or read from its folder for the
// layers timed only) on random tokens, at micro-batches of each of `sequences` sequences of
// config.model.seq_len, on config.device (the CPU with the current intra-op threads, or a GPU, each
// timing waiting for it) with products in config.dtype, as a rank computes: each layer's forward,
// its backward for its input (I: autograd with the weight-gradient store deferring, as the
// runtime's split backward runs it) and for its weights (W: the store's deferred work), and its
// whole backward at once (B, as the other schedules run it), each the median of `rounds` after one
// unmeasured (as a run's steps are summarised); the bytes it holds from forward to backward, the
// most its backward allocates beyond them, what W holds from I on, and the most a forward allocates
// beyond what it keeps, with autograd and without, by the device's tensor count
// (profile/tensor_bytes.h). Also AdamW's step per parameter (on a block's: its time and its
// temporaries' bytes), and the capacity of the device for `ranks` ranks sharing it, at each size: a
// block's forwards (without autograd) in `ranks` ranks at once against alone (about 0.3 s of work
// each), which says how many lone ranks' worth of work that many busy ranks do. On the CPU (with
// one thread; 0 ranks: one a core) the ranks are forked processes, switching between them included
// (more of them than cores pass a message around a ring between forwards, as a pipeline's ranks
// take turns at every message): call it before the process starts threads of its own that hold
// locks. On a GPU (0 ranks: 1, nothing measured) they are threads, each on a stream of its own, as
// ranks as threads sharing a GPU run. The times at each size are then scaled by that size's
// `calibration`: the median time of the embedding, up to 8 blocks (a model's worth of weights
// through the caches; fewer where they would take more than an eighth of the memory) and the head
// chained as one stage over the sum of their lone timings (F + B). On the CPU one rank's shard of
// each layer is timed and scaled the same way (table.tp_shards) at each tensor-parallel size a plan
// for `ranks` ranks may choose (dividing them, TransformerSpec::SplitsOver), its collectives
// skipped: a shard's own compute, which is not the whole layer's 1 / tp. UserError for a
// classifier, or sizes not two or more, ascending from 1 or more.
LayerCostTable ProfileLayerKinds(const TrainConfig& config, const std::vector<int64_t>& sequences,
                                 int rounds, int ranks);

}  // namespace conveyor

#endif  // CONVEYOR_TRAIN_LAYER_PROFILE_H_
