// Weights cast to the compute dtype of mixed-precision products (Linear's and the
// tensor-parallel products'), and a cache of those casts.
//
// Without the cache each product casts its fp32 weight for itself, in the forward and again
// in the backward of every micro-batch: 2 M casts of every weight a step of M micro-batches,
// each a read of the weight and a write of half its bytes (bf16, fp16). While a
// WeightCastCache lives in the process, a weight is cast once after each change and the copy
// serves every product until the weight changes again: its version counter (bumped by every
// in-place update: the optimizer's, a checkpoint's copy), its storage or its shape. The
// values are those of a fresh cast either way.
//
// Memory: with the cache on, a copy of every weight a product has read in each dtype it was
// read in (half the weights' bytes for bf16), held until the weight is freed or the last
// cache goes.
//
// Thread-safety: thread-safe (one mutex): rank threads and autograd's device threads share
// the cache.
#ifndef CONVEYOR_NN_WEIGHT_CAST_H_
#define CONVEYOR_NN_WEIGHT_CAST_H_

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace conveyor {

// `weight` in `dtype`, outside autograd: the weight itself when it has that dtype; else the
// cache's copy where a cache is on and the copy is fresh; else a new cast (kept where a cache
// is on).
at::Tensor CastWeight(const at::Tensor& weight, c10::ScalarType dtype);

// While at least one lives, CastWeight keeps its casts; when the last one goes, the copies
// are freed.
class WeightCastCache {
 public:
  WeightCastCache();
  ~WeightCastCache();
  WeightCastCache(const WeightCastCache&) = delete;
  WeightCastCache& operator=(const WeightCastCache&) = delete;

  // Casts CastWeight made, and those it served from the cache, since the process started.
  static int64_t casts();
  static int64_t reused();
};

}  // namespace conveyor

#endif  // CONVEYOR_NN_WEIGHT_CAST_H_
