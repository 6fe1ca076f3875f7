// The one reader of a tensor-parallel rank's slice of a stored tensor, for every format
// (tensor_source.h): given the stored tensor's dtype and shape and the parameter's layout
// (ParameterSpec, its split over the tensor-parallel ranks, tensor_parallel_split.h), it
// reads the bytes that rank's part needs and no others, and widens them to the destination's
// floating dtype (BF16 / F16 to fp32) in the one copy. What it returns equals
// TakeShard(whole tensor, spec.tp, size, rank) converted: each block's rows of the rank, the
// blocks in order, a padded vocabulary's rows past the tensor zeros.
//
// Bytes read: row-major, a split along dim 0 is one contiguous run per block (a fused QKV:
// three); a split along a later dim is one run per index of the dimensions before it
// (strided). A format that verifies its bytes in fixed-size chunks (a conveyor checkpoint)
// reads the chunks covering the runs, which for a strided slice can be the whole tensor.
//
// The split is in the stored layout: a format storing a parameter transposed (GPT-2's Conv1D
// weights) passes the spec with the other dimension and a transposed view as destination.
//
// Thread-safety: as the source's (not thread-safe).
#ifndef CONVEYOR_FORMATS_TENSOR_SLICE_H_
#define CONVEYOR_FORMATS_TENSOR_SLICE_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "conveyor/formats/tensor_source.h"
#include "conveyor/nn/parameter_spec.h"

namespace conveyor {

// The shape of rank `rank` of `size`'s slice of `stored` laid out as `spec` (the padding
// rows included). Throws UserError "<where>tensor '<name>' ..." when the tensor has no
// dimension spec.tp.dim or its extent does not split into `size` parts (ShardRowsOf).
// Precondition: 0 <= rank < size.
std::vector<int64_t> TensorSliceShape(const StoredTensor& stored, const ParameterSpec& spec,
                                      int size, int rank, const std::string& where,
                                      const std::string& name);

// Reads rank `rank` of `size`'s slice of the tensor `name` of `source` into `dst` (any
// floating dtype, of TensorSliceShape's shape, any strides: a parameter, or a view of one),
// reading that slice's bytes alone. Throws UserError for TensorSliceShape's refusals, for a
// `dst` of another shape, or for what source.ReadRuns refuses; `dst` is changed only when
// nothing is refused. Precondition: source.tensors() holds `name`.
void ReadTensorSliceInto(TensorSource& source, const std::string& name, const ParameterSpec& spec,
                         int size, int rank, const at::Tensor& dst);

// The slice, as a new contiguous fp32 tensor. ReadTensorSlice(source, name, {}, 1, 0) is the
// whole tensor.
at::Tensor ReadTensorSlice(TensorSource& source, const std::string& name, const ParameterSpec& spec,
                           int size, int rank);

}  // namespace conveyor

#endif  // CONVEYOR_FORMATS_TENSOR_SLICE_H_
