// What the runtime needs from a model slice: the contract between the model zoo (nn), which
// implements it, and the runtime, which runs it as one pipeline stage.
//
// A module sees micro-batches (microbatch.h), never ranks, programs or transports. Layers
// that split their backward queue their weight-gradient work in the WeightGradStore the
// runtime records around Forward (weight_grad_store.h).
//
// Thread-safety: a module is used by one thread at a time (its rank's executor), except that
// the autograd engine may run its backward on another thread.
#ifndef CONVEYOR_MODULE_STAGE_MODULE_H_
#define CONVEYOR_MODULE_STAGE_MODULE_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "conveyor/module/microbatch.h"

namespace conveyor {

// Tensors under their global names ("blocks.3.attn.qkv.weight"), independent of the partition.
using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

class StageModule {
 public:
  virtual ~StageModule() = default;
  // input: (n, T) int64 token ids on a first stage, the previous stage's output otherwise.
  virtual at::Tensor Forward(const at::Tensor& input, const MicroBatch& mb) = 0;
  // Last stage only: the loss summed over mb's counted targets (a scalar).
  virtual at::Tensor LossSum(const at::Tensor& output, const MicroBatch& mb) = 0;
  // Parameters under their global names.
  virtual NamedTensors NamedParameters() = 0;

  // The shapes of the activations this module receives (not asked of a first stage) and
  // sends (not asked of a last stage) for micro-batch mb: the runtime allocates its receive
  // buffers from them, for activations and for their gradients alike. For a transformer
  // stage both are (n, T, C).
  virtual std::vector<int64_t> InputShape(const MicroBatch& mb) const = 0;
  virtual std::vector<int64_t> OutputShape(const MicroBatch& mb) const = 0;
};

}  // namespace conveyor

#endif  // CONVEYOR_MODULE_STAGE_MODULE_H_
