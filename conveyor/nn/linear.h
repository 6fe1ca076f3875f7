// A linear map whose weight gradient can be deferred (split backward, Zero Bubble's I / W).
//
//   x: (..., in)   weight: (out, in)   bias: (out) or undefined   ->   (..., out)
//
// Under autograd it behaves like at::linear. When the forward ran inside a
// WeightGradStore::Recording and the store defers that key at backward time, the backward
// returns the input and bias gradients only and queues `weight.grad += g^T x` under the key;
// WeightGradStore::Run(key) applies it later. Result is the same gradient either way.
//
// Mixed precision: under autocast (ComputePrecisionGuard) the products of forward and
// backward run in autocast's dtype (bf16) on casts of x, weight (CastWeight: cached across
// micro-batches where a WeightCastCache is on, weight_cast.h) and bias; the output stays
// in that dtype, as at::linear's does under autocast (what follows it, an activation or the
// next product, reads half the bytes; a residual sum widens it again). x's gradient comes
// back in x's dtype, the weight and bias gradients in theirs (fp32), deferred or not.
#ifndef CONVEYOR_NN_LINEAR_H_
#define CONVEYOR_NN_LINEAR_H_

#include <ATen/core/Tensor.h>
#include <torch/csrc/autograd/custom_function.h>

namespace conveyor {

at::Tensor Linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);

// For other autograd functions whose products defer their weight gradients as Linear's do
// (tensor_parallel.h's ColumnParallelLinears): RecordWeightGradStore, called in forward, keeps
// the store recording then (WeightGradStore::Recording) in ctx; WeightGradOrDefer, called in
// backward, returns weight's gradient g2d^T x2d (x2d (N, in), g2d (N, out)) in weight's dtype,
// or, when that store defers its key now, queues adding it into weight's gradient there and
// returns an undefined tensor; an undefined tensor too, computing nothing, for a weight that
// does not require grad (frozen).
void RecordWeightGradStore(torch::autograd::AutogradContext* ctx);
at::Tensor WeightGradOrDefer(torch::autograd::AutogradContext* ctx, const at::Tensor& weight,
                             const at::Tensor& x2d, const at::Tensor& g2d);

}  // namespace conveyor

#endif  // CONVEYOR_NN_LINEAR_H_
